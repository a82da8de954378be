"""A token bucket for client-side QPS/burst limits on the remote API server.

The remote cluster is shared with other tenants; an unbounded burst of creates after a restart
resync would be throttled by its priority-and-fairness anyway, so the limit is explicit here.
"""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; ``acquire`` waits for one."""

    def __init__(self, qps: float, burst: int) -> None:
        self._rate = qps
        self._capacity = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self._rate)
