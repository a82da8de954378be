from __future__ import annotations

import asyncio
from typing import Any

import pytest
from placement_support import Clock, MemProvider, offer, placer_for

from vkprovider.errors import Transient
from vkprovider.models import Capabilities, ProviderInfo, RateLimit
from vkprovider.placement.config import PlacementConfig, ProviderPlacementConfig, RateLimitConfig
from vkprovider.placement.ratelimit import RateLimiters, TokenBucket


async def test_burst_then_waits_for_refill() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        await bucket.acquire()
    assert clock.slept == []
    await bucket.acquire()
    assert clock.slept == [pytest.approx(0.5)]  # one token at 2/s
    assert not bucket.try_acquire()
    clock.advance(10)  # refill is capped at the burst
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


async def test_waiters_are_served_in_order() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=1.0, burst=1, clock=clock, sleep=clock.sleep)
    order: list[int] = []

    async def take(i: int) -> None:
        await bucket.acquire()
        order.append(i)

    await asyncio.wait_for(asyncio.gather(*(take(i) for i in range(4))), timeout=5)
    assert order == [0, 1, 2, 3]
    assert sum(clock.slept) == pytest.approx(3.0)


async def test_limiters_per_provider_config() -> None:
    clock = Clock()
    limiters = RateLimiters(
        RateLimitConfig(per_second=1, burst=1),
        {"fast": RateLimitConfig(per_second=100, burst=5)},
        clock=clock,
    )
    assert limiters.bucket("fast").burst == 5 and limiters.bucket("other").burst == 1
    assert limiters.bucket("fast") is limiters.bucket("fast")


def test_invalid_bucket() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1)


class Declaring(MemProvider):
    """An adapter that declares its API's rate limit (or fails to answer ``info``)."""

    def __init__(self, name: str, limit: RateLimit | None, *, broken: bool = False) -> None:
        super().__init__(name, [offer(name, f"{name}1", 1.0)])
        self.limit, self.broken = limit, broken

    async def info(self) -> ProviderInfo:
        if self.broken:
            raise Transient("plugin restarting")
        return ProviderInfo(
            name=self.name, adapter="x", version="0", capabilities=Capabilities(rate_limit=self.limit)
        )


async def test_adapters_declare_their_api_limit_as_the_default() -> None:
    clock = Clock()
    slow = Declaring("slow", RateLimit(per_second=2.0, burst=1))
    free = Declaring("free", RateLimit())  # declares no limit at all
    quiet = Declaring("quiet", None)  # declares nothing
    placer: Any = await placer_for(slow, free, quiet, clock=clock)
    assert placer.limiters.limit("slow") == (2.0, 1)
    assert placer.limiters.limit("free") == (None, 1) and placer.limiters.bucket("free") is None
    assert placer.limiters.limit("quiet") == (10.0, 20)  # the built-in default
    clock.slept.clear()
    for _ in range(50):
        await placer.limiters.acquire("free")
    assert clock.slept == []
    for _ in range(3):
        await placer.limiters.acquire("slow")
    assert sum(clock.slept) == pytest.approx(1.5)  # 2/s, burst 1 (taken by the refresh): 3 x 0.5 s


async def test_config_wins_over_a_declared_limit() -> None:
    slow = Declaring("slow", RateLimit(per_second=2.0, burst=1))
    other = Declaring("other", RateLimit(per_second=3.0, burst=2))
    cfg = PlacementConfig(
        providers={"slow": ProviderPlacementConfig(rate_limit=RateLimitConfig(per_second=50))}
    )
    placer: Any = await placer_for(slow, other, config=cfg)
    assert placer.limiters.limit("slow") == (50.0, 20) and placer.limiters.limit("other") == (3.0, 2)
    explicit = PlacementConfig.model_validate({"rate_limit": {"per_second": 5, "burst": 5}})
    placer = await placer_for(Declaring("slow", RateLimit(per_second=2.0)), config=explicit)
    assert placer.limiters.limit("slow") == (5.0, 5)  # one explicit limit for every provider


async def test_an_adapter_that_cannot_answer_is_asked_again_at_the_next_refresh() -> None:
    plugin = Declaring("plugin", RateLimit(), broken=True)
    placer: Any = await placer_for(plugin)
    assert placer.limiters.limit("plugin") == (10.0, 20)
    plugin.broken = False
    await placer.refresh()
    assert placer.limiters.limit("plugin") == (None, 1)


async def test_fakecloud_declares_no_limit() -> None:
    from vkprovider_fakecloud.adapter import FakeCloudProvider

    provider = FakeCloudProvider("fc", FakeCloudProvider.Settings(url="http://127.0.0.1:9"))
    try:
        assert (await provider.info()).capabilities.rate_limit == RateLimit(per_second=None)
    finally:
        await provider.close()
