"""supervise(): restart on crash with backoff, stop on return, propagate cancellation;
LeaderElector argument validation."""

from __future__ import annotations

import asyncio
import logging

import pytest

from vkprovider.kube.leader import LeaderElector
from vkprovider.tasks import supervise


async def test_supervise_restarts_a_crashed_loop_and_logs_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError(f"boom {runs}")

    async with asyncio.timeout(5):
        with caplog.at_level(logging.ERROR, logger="vkprovider.tasks"):
            await supervise("flaky", flaky, restart_delay=0.01)
    assert runs == 3
    crashes = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert len(crashes) == 2 and crashes[0].exc_info is not None


async def test_supervise_backs_off_doubling_to_the_cap_and_resets_after_a_healthy_run() -> None:
    delays: list[float] = []
    runs = 0

    async def record(delay: float) -> None:
        delays.append(delay)
        await asyncio.sleep(0)

    clock = [0.0]

    async def crashes() -> None:
        nonlocal runs
        runs += 1
        if runs == 5:
            clock[0] += 120.0  # this run lasted past healthy_after: the next delay starts over
        if runs < 7:
            raise RuntimeError("boom")

    # The sleep and the clock are supervise's own (injected): the loop's and other tasks' stay real.
    await supervise(
        "crashes",
        crashes,
        restart_delay=1.0,
        max_delay=4.0,
        healthy_after=60.0,
        sleep=record,
        clock=lambda: clock[0],
    )
    assert delays == [1.0, 2.0, 4.0, 4.0, 1.0, 2.0]


async def test_supervise_propagates_cancellation() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(supervise("forever", forever))
    async with asyncio.timeout(5):
        await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await task


def test_leader_elector_rejects_inconsistent_timings() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, "ns", "l", "me", lease_duration=5, renew_deadline=5, retry_period=1)  # type: ignore[arg-type]
