"""A bound on authentication/authorization reviews in flight, with concurrent reviews coalesced.

Every unknown bearer token costs a TokenReview, and anyone who can open a connection can send
one: without a bound, a flood of random tokens queues reviews without end (memory, and the
apiserver's time). So the reviews of a process share one budget (the kubelet API and the admin
API alike): past ``limit`` reviews in flight a new one is refused *at once* (:class:`Busy`, a
429 with ``Retry-After`` to the caller) instead of waiting, and concurrent reviews of the same
key (a hash of the token, or of the user and attributes) share one apiserver call, so a client
retrying one token in parallel costs one review, not one per request.

The budget does not rate-limit: the reviews' own API client does (``kubelet.review_qps``), and
waiting for its limiter counts as in flight, so the bound also caps that queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

log = logging.getLogger(__name__)

T = TypeVar("T")


class Busy(Exception):
    """Too many reviews in flight: answer 429 now, ``retry_after`` seconds as a hint."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many credential reviews in flight; retry after {retry_after:g}s")
        self.retry_after = retry_after


class ReviewBudget:
    """``await budget.review(key, call)``: ``call()`` under the bound, shared by equal keys."""

    def __init__(self, limit: int = 64, *, retry_after: float = 1.0) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.retry_after = retry_after
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self.rejected = 0  #: reviews refused with Busy (figures, tests)
        self.coalesced = 0  #: reviews answered by another caller's call in flight

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def review(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        """The result of ``call()``, or of the call already in flight for ``key``.

        The call runs as its own task: a caller that goes away (its connection closed) does
        not cancel the review others wait for; the slot is freed when the call ends."""
        pending = self._pending.get(key)
        if pending is None:
            if len(self._pending) >= self.limit:
                self.rejected += 1
                raise Busy(self.retry_after)
            started: asyncio.Future[Any] = asyncio.ensure_future(call())
            self._pending[key] = pending = started
            started.add_done_callback(lambda done: self._finished(key, done))
        else:
            self.coalesced += 1
        return cast(T, await asyncio.shield(pending))

    def _finished(self, key: str, done: asyncio.Future[Any]) -> None:
        if self._pending.get(key) is done:
            del self._pending[key]
        if not done.cancelled() and done.exception() is not None:
            log.debug("review %s failed: %r", key[:12], done.exception())  # mark retrieved
