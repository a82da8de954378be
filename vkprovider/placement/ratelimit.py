"""Client-side rate limits per provider: a token bucket (``vkprovider.ratelimit``) each.

Providers throttle hard (429s, account bans) when a burst of pods lands at once; spacing our own
calls is cheaper than recovering from their limits. Waiters are served in arrival order. The
clock and sleep are injectable so tests can drive time without real waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from vkprovider.placement.config import RateLimitConfig
from vkprovider.ratelimit import Sleep, TokenBucket


class RateLimiters:
    """One bucket per provider, from the per-provider config or the default."""

    def __init__(
        self,
        default: RateLimitConfig,
        per_provider: Mapping[str, RateLimitConfig | None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._default = default
        self._per_provider = dict(per_provider or {})
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[str, TokenBucket] = {}

    def bucket(self, provider: str) -> TokenBucket:
        bucket = self._buckets.get(provider)
        if bucket is None:
            cfg = self._per_provider.get(provider) or self._default
            bucket = TokenBucket(cfg.per_second, cfg.burst, clock=self._clock, sleep=self._sleep)
            self._buckets[provider] = bucket
        return bucket

    async def acquire(self, provider: str) -> None:
        await self.bucket(provider).acquire()
