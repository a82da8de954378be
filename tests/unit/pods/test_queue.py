"""The work queue's guarantees: coalescing, one worker per key, backoff, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from vkprovider.pods.queue import ShutDown, WorkQueue
from vkprovider.ratelimit import TokenBucket


async def test_adding_a_queued_key_twice_coalesces() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_key_added_while_processing_is_requeued_after_done_not_handed_out_twice() -> None:
    queue = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # an event arrives while a worker holds "a"
    assert len(queue) == 0  # no second worker may take it now
    queue.done(key)
    assert len(queue) == 1 and await queue.get() == "a"


async def test_backoff_doubles_per_failure_and_forget_resets() -> None:
    queue = WorkQueue(base_delay=0.5, max_delay=3.0)
    delays = [queue.add_rate_limited("a") for _ in range(5)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]
    queue.forget("a")
    assert queue.backoff("a") == 0.5
    assert queue.add_rate_limited("a", at_least=7.0) == 7.0  # Retry-After wins over backoff


async def test_add_after_fires_and_an_earlier_add_wins() -> None:
    queue = WorkQueue()
    queue.add_after("a", 0.05)
    assert len(queue) == 0
    async with asyncio.timeout(5):
        assert await queue.get() == "a"
    queue.done("a")
    queue.add_after("b", 60)
    queue.add("b")  # an event makes it due now; the timer is cancelled
    async with asyncio.timeout(5):
        assert await queue.get() == "b"


async def test_shutdown_releases_every_waiting_worker() -> None:
    queue = WorkQueue()
    waiters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.shutdown()
    for waiter in waiters:
        with pytest.raises(ShutDown):
            async with asyncio.timeout(5):
                await waiter


class FrozenTime:
    """A clock that moves only when told, and a sleep that waits for it, for a TokenBucket."""

    def __init__(self) -> None:
        self.now = 0.0
        self.moved = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await self.moved.wait()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.moved.set()


async def test_a_worker_cancelled_while_rate_limited_does_not_strand_its_key() -> None:
    time = FrozenTime()
    bucket = TokenBucket(1.0, 1, clock=time.clock, sleep=time.sleep)
    assert bucket.try_acquire()  # the bucket is empty: the next get must wait for a token
    queue = WorkQueue(rate=bucket)
    queue.add("a")
    waiting = asyncio.create_task(queue.get())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()  # e.g. leadership lost, or shutdown of the worker's task group
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert queue.busy == 0 and len(queue) == 1
    time.advance(5.0)
    async with asyncio.timeout(5):
        assert await queue.get() == "a"  # handed out again, not stuck as "processing"


async def test_a_plain_add_during_backoff_keeps_the_failure_count() -> None:
    queue = WorkQueue(base_delay=0.5, max_delay=60.0)
    assert [queue.add_rate_limited("a") for _ in range(3)] == [0.5, 1.0, 2.0]
    queue.add("a")  # an unrelated event while the key waits out its backoff
    async with asyncio.timeout(5):
        key = await queue.get()
    queue.done(key)
    assert queue.add_rate_limited("a") == 4.0  # still backing off, not back to 0.5
