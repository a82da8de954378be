"""The one backoff policy for every loop that retries (DESIGN §7): tenacity, configured here.

Two shapes cover every caller:

* ``retrying(...)`` — an ``AsyncRetrying`` for a call that is retried until it works (or until
  ``attempts``), with exponential backoff, an optional server-given minimum (``Retry-After``)
  and a log line per retry; use it as ``async for attempt in retrying(...): with attempt: ...``.
* ``Backoff`` — the same delays for a long-running loop that decides for itself when to wait
  (a watch that is re-opened, a plugin that is restarted): ``next()`` gives the delay to sleep,
  ``reset()`` after a healthy run.

Delays grow ``base * 2**n`` up to ``cap``, with up to ``jitter`` of random spread so replicas and
providers do not retry in lock-step. Cancellation is never retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_never,
    wait_exponential,
    wait_random,
)
from tenacity.wait import wait_base

Sleep = Callable[[float], Awaitable[None]]


def exponential(base: float, cap: float, jitter: float = 0.0) -> wait_base:
    """The wait strategy: ``base * 2**(attempt-1)``, capped, plus up to ``jitter`` seconds."""
    wait: wait_base = wait_exponential(multiplier=base, exp_base=2, min=base, max=cap)
    if jitter > 0:
        wait = wait + wait_random(0, jitter)
    return wait


def retrying(
    *,
    base: float = 0.5,
    cap: float = 30.0,
    attempts: int | None = None,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    at_least: Callable[[BaseException], float] | None = None,
    logger: logging.Logger | None = None,
    what: str = "call",
    sleep: Sleep = asyncio.sleep,
) -> AsyncRetrying:
    """Retry ``retry_on`` errors with exponential backoff; re-raise the last one when stopping.

    ``at_least(exc)`` lets an error ask for a longer wait (a provider's ``Retry-After``)."""
    strategy = exponential(base, cap)

    def wait(state: RetryCallState) -> float:
        delay = float(strategy(state))
        exc = state.outcome.exception() if state.outcome is not None else None
        if at_least is not None and exc is not None:
            delay = max(delay, at_least(exc))
        return delay

    def before_sleep(state: RetryCallState) -> None:
        if logger is None or state.outcome is None:
            return
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "%s failed (attempt %d): %s; retrying in %.1fs",
            what,
            state.attempt_number,
            state.outcome.exception(),
            delay,
        )

    def retryable(exc: BaseException) -> bool:
        return isinstance(exc, retry_on) and not isinstance(exc, asyncio.CancelledError)

    return AsyncRetrying(
        stop=stop_after_attempt(attempts) if attempts else stop_never,
        wait=wait,
        retry=retry_if_exception(retryable),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )


class Backoff:
    """Delays for a loop that waits on its own terms; the same curve as ``retrying``."""

    def __init__(self, base: float = 1.0, cap: float = 60.0, jitter: float = 0.0) -> None:
        self._wait = exponential(base, cap, jitter)
        self._failures = 0

    @property
    def failures(self) -> int:
        return self._failures

    def next(self) -> float:
        """The delay before the next try; each call counts one more failure."""
        self._failures += 1
        state = RetryCallState(retry_object=AsyncRetrying(), fn=None, args=(), kwargs={})
        state.attempt_number = self._failures
        return float(self._wait(state))

    def reset(self) -> None:
        self._failures = 0


__all__ = ["Backoff", "exponential", "retrying"]
