"""The retry policy for one provider call, in one place: tenacity on ``Transient`` only.

Backoff is exponential from ``base``, never shorter than the provider's ``retry_after`` and
never longer than ``limit``; a provider asking for more than ``limit`` is not waited for (the
Placer moves to the next candidate instead of holding a pod worker for minutes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from vkprovider.errors import Transient


def transient_retry(
    attempts: int, base: float, limit: float, sleep: Callable[[float], Awaitable[None]]
) -> AsyncRetrying:
    return AsyncRetrying(
        stop=_stop(attempts, limit),
        wait=_backoff(base, limit),
        retry=retry_if_exception_type(Transient),
        sleep=sleep,
        reraise=True,
    )


def retry_after_of(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome is not None else None
    return exc.retry_after or 0.0 if isinstance(exc, Transient) else 0.0


def _stop(attempts: int, limit: float) -> Callable[[RetryCallState], bool]:
    """Give up on this candidate after ``attempts`` tries, or when asked to wait over ``limit``."""

    def stop(state: RetryCallState) -> bool:
        return state.attempt_number >= attempts or retry_after_of(state) > limit

    return stop


def _backoff(base: float, limit: float) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exponential = base * 2.0 ** (state.attempt_number - 1)
        return min(max(exponential, retry_after_of(state)), limit)

    return wait
