"""The retry policy for one provider call: the project's one backoff curve (``vkprovider.retry``)
on ``Transient`` only, plus one placement rule.

Backoff is the shared exponential curve from ``base`` capped at ``limit``, never shorter than the
provider's ``retry_after``. The placement rule: a provider asking for more than ``limit`` is not
waited for at all; the Placer moves to the next candidate instead of holding a pod worker for
minutes.

Why not ``retrying()`` (tenacity's loop) here: this is the one retry on every pod's way up, and
almost every call works the first time. tenacity builds its retry object before the first try
(20 µs, and some 45 objects in reference cycles that only the cyclic GC frees: most of the
service's cyclic garbage in the 1,000-pod bench). ``TransientRetry`` makes the first call bare
and builds the backoff (``Backoff``, the same curve) only once a call has failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from vkprovider.errors import Transient
from vkprovider.retry import Backoff

T = TypeVar("T")


class TransientRetry:
    """Up to ``attempts`` tries of a call that raises ``Transient`` on a passing failure."""

    def __init__(
        self, attempts: int, base: float, limit: float, sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._attempts = max(1, attempts)
        self._base = min(base, limit)
        self._limit = limit
        self._sleep = sleep

    async def run(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()`` until it returns, raises anything but ``Transient``, has been tried
        ``attempts`` times, or asks (``retry_after``) to wait longer than ``limit``; the last
        error is raised as it was."""
        backoff: Backoff | None = None
        tries = 0
        while True:
            tries += 1
            try:
                return await call()
            except Transient as exc:
                if tries >= self._attempts or retry_after_of_error(exc) > self._limit:
                    raise
                backoff = backoff or Backoff(base=self._base, cap=self._limit)
                await self._sleep(max(backoff.next(), retry_after_of_error(exc)))


def retry_after_of_error(exc: BaseException) -> float:
    return (exc.retry_after or 0.0) if isinstance(exc, Transient) else 0.0
