"""A per-key work queue with client-go's guarantees.

* A key is processed by at most one worker at a time; adding a key while it is processed marks
  it dirty, and it is queued again when the worker calls ``done``.
* Adding a key that is already queued is a no-op (events coalesce).
* ``add_rate_limited`` re-adds after a per-key exponential backoff (reset only by ``forget``: a
  plain ``add`` while the key waits out its backoff queues it now but keeps its failure count),
  and a global bucket caps how fast *retries* come back overall (client-go's default
  controller rate limiter: the slower of the two). Work that events bring (a new pod, a
  deletion) is not throttled here: the API client's QPS limit and the providers' limits are
  what bound it, so a burst of new pods is not held to the retry rate.
* ``get`` is cancel-safe: a worker cancelled while waiting leaves no key marked processing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class RetryBudget:
    """A token bucket that hands out reservations (golang.org/x/time/rate's ``Reserve``): each
    retry takes the next free slot and learns how long to wait for it, nothing sleeps here."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate, self.burst = rate, float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()

    def reserve(self) -> float:
        """Take one token; the seconds until it is really available (0: now)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + max(0.0, now - self._stamp) * self.rate) - 1.0
        self._stamp = now
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


class WorkQueue:
    def __init__(
        self,
        *,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
        retries: RetryBudget | None = None,
    ) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._delayed: dict[str, asyncio.TimerHandle] = {}
        self._base = base_delay
        self._max = max_delay
        self._retries = retries
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def busy(self) -> int:
        return len(self._processing)

    def add(self, key: str) -> None:
        if self._shutdown:
            return
        timer = self._delayed.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds unless something queues it sooner."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        existing = self._delayed.get(key)
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        if existing is not None:
            if existing.when() <= when:
                return
            existing.cancel()
        self._delayed[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: str) -> None:
        self._delayed.pop(key, None)
        self.add(key)

    def backoff(self, key: str) -> float:
        return float(min(self._max, self._base * 2.0 ** self._failures.get(key, 0)))

    def add_rate_limited(self, key: str, at_least: float = 0.0) -> float:
        """Re-add with exponential backoff (at least ``at_least`` seconds); returns the delay."""
        delay = max(self.backoff(key), at_least)
        if self._retries is not None:
            delay = max(delay, self._retries.reserve())
        self._failures[key] = self._failures.get(key, 0) + 1
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def processing(self, key: str) -> bool:
        """Is a worker on ``key`` right now?"""
        return key in self._processing

    async def get(self) -> str:
        if self._shutdown:
            raise ShutDown
        key = await self._queue.get()  # cancel-safe: nothing is taken unless it returns
        if key is None or self._shutdown:
            self._queue.put_nowait(None)  # wake the next worker too
            raise ShutDown
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def shutdown(self) -> None:
        """Stop handing out keys; blocked ``get`` calls raise ``ShutDown``."""
        self._shutdown = True
        for timer in self._delayed.values():
            timer.cancel()
        self._delayed.clear()
        self._queue.put_nowait(None)
