"""The retry policy for one provider call: the project's one policy (``vkprovider.retry``) on
``Transient`` only, plus one placement rule.

Backoff is the shared exponential curve from ``base`` capped at ``limit``, never shorter than the
provider's ``retry_after``. The placement rule: a provider asking for more than ``limit`` is not
waited for at all; the Placer moves to the next candidate instead of holding a pod worker for
minutes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tenacity import AsyncRetrying, RetryCallState

from vkprovider.errors import Transient
from vkprovider.retry import retrying


def transient_retry(
    attempts: int, base: float, limit: float, sleep: Callable[[float], Awaitable[None]]
) -> AsyncRetrying:
    policy = retrying(
        base=min(base, limit),
        cap=limit,
        attempts=attempts,
        retry_on=(Transient,),
        at_least=retry_after_of_error,
        sleep=sleep,
    )
    return policy.copy(stop=_stop(attempts, limit))


def retry_after_of_error(exc: BaseException) -> float:
    return (exc.retry_after or 0.0) if isinstance(exc, Transient) else 0.0


def _stop(attempts: int, limit: float) -> Callable[[RetryCallState], bool]:
    """Give up on this candidate after ``attempts`` tries, or when asked to wait over ``limit``."""

    def stop(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome is not None else None
        too_long = exc is not None and retry_after_of_error(exc) > limit
        return state.attempt_number >= attempts or too_long

    return stop
