"""The work queue's guarantees: coalescing, one worker per key, backoff, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from vkprovider.pods.queue import RetryBudget, ShutDown, WorkQueue


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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_retries_share_a_global_budget_but_new_work_is_never_held_by_it() -> None:
    clock = Clock()
    queue = WorkQueue(base_delay=0.01, max_delay=0.01, retries=RetryBudget(10.0, 2, clock=clock))
    delays = [queue.add_rate_limited(key) for key in ("a", "b", "c", "d")]
    assert delays[:2] == [0.01, 0.01]  # the burst
    assert delays[2:] == pytest.approx([0.1, 0.2])  # then one retry per 1/10 s, in turn
    clock.now += 1.0  # the budget refills (up to its burst)
    assert queue.add_rate_limited("e") == 0.01
    for i in range(100):  # events bring work: handed out at once, however many
        queue.add(f"new-{i}")
    async with asyncio.timeout(5):
        got = [await queue.get() for _ in range(100)]
    assert got == [f"new-{i}" for i in range(100)]


async def test_a_worker_cancelled_while_waiting_does_not_strand_a_key() -> None:
    queue = WorkQueue()
    waiting = asyncio.create_task(queue.get())
    for _ in range(5):
        await asyncio.sleep(0)
    waiting.cancel()  # e.g. leadership lost, or shutdown of the worker's task group
    with pytest.raises(asyncio.CancelledError):
        await waiting
    queue.add("a")
    assert queue.busy == 0 and len(queue) == 1
    async with asyncio.timeout(5):
        assert await queue.get() == "a"


async def test_a_plain_add_during_backoff_keeps_the_failure_count() -> None:
    queue = WorkQueue(base_delay=0.5, max_delay=60.0)
    assert [queue.add_rate_limited("a") for _ in range(3)] == [0.5, 1.0, 2.0]
    queue.add("a")  # an unrelated event while the key waits out its backoff
    async with asyncio.timeout(5):
        key = await queue.get()
    queue.done(key)
    assert queue.add_rate_limited("a") == 4.0  # still backing off, not back to 0.5
