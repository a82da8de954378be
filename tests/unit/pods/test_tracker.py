"""The provider status tracker: one list per provider, and no false 'missing' from a stale list."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from vkprovider.errors import Transient
from vkprovider.models import Capabilities, DeploymentStatus, Phase, ProviderInfo
from vkprovider.pods.tracker import DeploymentTracker


class ListingProvider:
    """Lists what ``statuses`` holds; ``gate`` lets a test hold a list call in flight."""

    def __init__(self) -> None:
        self.statuses: dict[str, DeploymentStatus] = {}
        self.gate: asyncio.Event | None = None
        self.fail = False
        self.calls = 0

    async def probe(self) -> None:
        if self.fail:
            raise Transient("backend down")

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        self.calls += 1
        snapshot = list(self.statuses.values())
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise Transient("backend down")
        return snapshot


def running(uid: str) -> DeploymentStatus:
    return DeploymentStatus(uid=uid, phase=Phase.RUNNING, ready=True)


async def test_one_list_call_per_provider_serves_every_pod() -> None:
    provider = ListingProvider()
    provider.statuses = {f"u{i}": running(f"u{i}") for i in range(50)}
    changed: list[str] = []
    tracker = DeploymentTracker({"p": provider}, "vk", interval=1, on_change=changed.append)  # type: ignore[dict-item]
    await tracker.poll_once()
    assert provider.calls == 1
    assert len(tracker.deployments) == 50 and sorted(changed) == sorted(provider.statuses)


async def test_deploy_answered_during_a_list_is_not_marked_missing() -> None:
    provider = ListingProvider()
    tracker = DeploymentTracker({"p": provider}, "vk", interval=1, on_change=lambda uid: None)  # type: ignore[dict-item]
    provider.gate = asyncio.Event()
    poll = asyncio.create_task(tracker.poll_once())
    await asyncio.sleep(0)  # the list snapshot is taken: it cannot contain the new deployment
    tracker.record("new", "p", running("new"))
    provider.gate.set()
    await poll
    tracked = tracker.get("new")
    assert tracked is not None and tracked.missing_since is None


async def test_vanished_deployment_is_marked_missing_and_failed_list_changes_nothing() -> None:
    provider = ListingProvider()
    provider.statuses = {"a": running("a"), "b": running("b")}
    changed: list[str] = []
    tracker = DeploymentTracker({"p": provider}, "vk", interval=1, on_change=changed.append)  # type: ignore[dict-item]
    await tracker.poll_once()
    del provider.statuses["b"]
    provider.fail = True
    changed.clear()
    await tracker.poll_once()
    assert all(t.missing_since is None for t in tracker.deployments.values())
    assert tracker.unreachable_since("p") is not None
    assert sorted(changed) == ["a", "b"]  # the API went away: its pods are looked at (condition)
    provider.fail = False
    changed.clear()
    await tracker.poll_once()
    assert tracker.unreachable_since("p") is None
    assert set(changed) == {"a", "b"}  # b is missing now; a is looked at because the API is back
    missing = tracker.get("b")
    assert missing is not None and missing.missing_since is not None


class PushingProvider(ListingProvider):
    """Also pushes statuses through ``watch`` (capability declared), from a queue the test fills."""

    def __init__(self) -> None:
        super().__init__()
        self.pushes: asyncio.Queue[DeploymentStatus] = asyncio.Queue()

    async def info(self) -> ProviderInfo:
        return ProviderInfo(name="p", adapter="push", version="0", capabilities=Capabilities(watch=True))

    async def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        while True:
            yield await self.pushes.get()


async def test_pushed_statuses_arrive_between_polls() -> None:
    provider = PushingProvider()
    changed: asyncio.Queue[str] = asyncio.Queue()
    tracker = DeploymentTracker({"p": provider}, "vk", interval=3600, on_change=changed.put_nowait)  # type: ignore[dict-item]
    tracker.record("u1", "p", DeploymentStatus(uid="u1", phase=Phase.PENDING))
    task = asyncio.create_task(tracker.run())
    try:
        provider.pushes.put_nowait(running("u1"))
        async with asyncio.timeout(5):
            assert await changed.get() == "u1"
        tracked = tracker.get("u1")
        assert tracked is not None and tracked.status.phase is Phase.RUNNING
        # The end of a deployment we already forgot is not resurrected.
        provider.pushes.put_nowait(DeploymentStatus(uid="gone", phase=Phase.SUCCEEDED))
        provider.pushes.put_nowait(running("u1b"))
        async with asyncio.timeout(5):
            assert await changed.get() == "u1b"
        assert tracker.get("gone") is None
        assert tracker.polls == 0 and tracker.pushed == 3
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
