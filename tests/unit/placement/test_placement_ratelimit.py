from __future__ import annotations

import asyncio

import pytest
from placement_support import Clock

from vkprovider.placement.config import RateLimitConfig
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
