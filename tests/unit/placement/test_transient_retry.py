"""``TransientRetry``: the shared backoff curve on ``Transient`` only, honouring ``retry_after``,
never waiting longer than the limit, and trying at most ``attempts`` times."""

from __future__ import annotations

import pytest

from vkprovider.errors import InvalidRequest, Transient
from vkprovider.placement.retry import TransientRetry


class Calls:
    """A call that fails with the given errors in turn, then answers ``"ok"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.count = 0

    async def __call__(self) -> str:
        self.count += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Clock:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_a_call_that_works_is_made_once_without_waiting() -> None:
    clock, call = Clock(), Calls()
    assert await TransientRetry(5, 0.5, 30.0, clock.sleep).run(call) == "ok"
    assert (call.count, clock.slept) == (1, [])


async def test_transient_failures_back_off_on_the_shared_curve_up_to_the_limit() -> None:
    clock, call = Clock(), Calls(*[Transient("503") for _ in range(5)])
    assert await TransientRetry(10, 0.5, 3.0, clock.sleep).run(call) == "ok"
    assert call.count == 6
    assert clock.slept == [0.5, 1.0, 2.0, 3.0, 3.0]


async def test_retry_after_lengthens_a_wait_and_one_over_the_limit_is_not_waited_for() -> None:
    clock, call = Clock(), Calls(Transient("429", retry_after=2.5), Transient("429", retry_after=60.0))
    with pytest.raises(Transient, match="429"):
        await TransientRetry(10, 0.5, 30.0, clock.sleep).run(call)
    assert call.count == 2
    assert clock.slept == [2.5]


async def test_attempts_bound_the_tries_and_the_last_error_is_raised_as_it_was() -> None:
    last = Transient("third")
    clock, call = Clock(), Calls(Transient("first"), Transient("second"), last, Transient("never"))
    with pytest.raises(Transient) as raised:
        await TransientRetry(3, 0.1, 30.0, clock.sleep).run(call)
    assert raised.value is last
    assert call.count == 3 and len(clock.slept) == 2


async def test_anything_but_transient_is_not_retried() -> None:
    clock, call = Clock(), Calls(InvalidRequest("bad gpu"))
    with pytest.raises(InvalidRequest):
        await TransientRetry(5, 0.5, 30.0, clock.sleep).run(call)
    assert (call.count, clock.slept) == (1, [])
