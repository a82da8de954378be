"""The shared backoff policy: delays grow, cap, honour a server minimum, and stop when told."""

from __future__ import annotations

import pytest

from vkprovider.errors import Transient
from vkprovider.retry import Backoff, retrying


def test_backoff_doubles_caps_and_resets() -> None:
    backoff = Backoff(base=1.0, cap=5.0)
    assert [backoff.next() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 1.0


async def test_retrying_honours_retry_after_and_stops() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    calls = 0
    with pytest.raises(Transient):
        async for attempt in retrying(
            base=0.5,
            cap=10.0,
            attempts=3,
            retry_on=(Transient,),
            at_least=lambda exc: getattr(exc, "retry_after", None) or 0.0,
            sleep=sleep,
        ):
            with attempt:
                calls += 1
                raise Transient("busy", retry_after=3.0 if calls == 1 else None)
    assert calls == 3
    assert slept == [3.0, 1.0]


async def test_retrying_does_not_retry_other_errors() -> None:
    calls = 0
    with pytest.raises(ValueError):
        async for attempt in retrying(retry_on=(Transient,)):
            with attempt:
                calls += 1
                raise ValueError("bug")
    assert calls == 1
