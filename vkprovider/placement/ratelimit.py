"""Client-side rate limits per provider: a token bucket (``vkprovider.ratelimit``) each.

Providers throttle hard (429s, account bans) when a burst of pods lands at once; spacing our own
calls is cheaper than recovering from their limits. But one number does not fit every API, so
the limit for a provider is, first match wins:

1. its own ``placement.providers.<name>.rate_limit`` in config;
2. ``placement.rate_limit``, when the config sets it explicitly (one limit for all);
3. what its adapter declares in ``ProviderInfo.capabilities.rate_limit`` (:meth:`declare`), which
   may be "no limit" (fakecloud: a local test server);
4. the built-in default, ``RateLimitConfig()``.

Waiters are served in arrival order. The clock and sleep are injectable so tests can drive time
without real waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from vkprovider.models import RateLimit
from vkprovider.placement.config import RateLimitConfig
from vkprovider.ratelimit import Sleep, TokenBucket


class RateLimiters:
    """One bucket per provider (``None``: no limit), chosen as the module docstring says."""

    def __init__(
        self,
        default: RateLimitConfig,
        per_provider: Mapping[str, RateLimitConfig | None] | None = None,
        *,
        default_is_explicit: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._default = default
        self._default_is_explicit = default_is_explicit
        self._configured = {n: c for n, c in (per_provider or {}).items() if c is not None}
        self._declared: dict[str, RateLimit] = {}
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[str, TokenBucket | None] = {}

    def configured(self, provider: str) -> bool:
        """Does config decide this provider's limit (so a declaration would be ignored)?"""
        return provider in self._configured or self._default_is_explicit

    def declare(self, provider: str, limit: RateLimit | None) -> None:
        """The adapter's own limit (``None``: it declares nothing); takes effect at once."""
        if limit is None:
            self._declared.pop(provider, None)
        else:
            self._declared[provider] = limit
        self._buckets.pop(provider, None)

    def bucket(self, provider: str) -> TokenBucket | None:
        if provider in self._buckets:
            return self._buckets[provider]
        rate, burst = self.limit(provider)
        bucket = None if rate is None else TokenBucket(rate, burst, clock=self._clock, sleep=self._sleep)
        self._buckets[provider] = bucket
        return bucket

    def limit(self, provider: str) -> tuple[float | None, int]:
        """``(per second, burst)`` in force for ``provider``; ``None`` per second: unlimited."""
        cfg = self._configured.get(provider)
        if cfg is None and not self._default_is_explicit:
            declared = self._declared.get(provider)
            if declared is not None:
                return declared.per_second, declared.burst
        cfg = cfg or self._default
        return cfg.per_second, cfg.burst

    async def acquire(self, provider: str) -> None:
        bucket = self.bucket(provider)
        if bucket is not None:
            await bucket.acquire()
