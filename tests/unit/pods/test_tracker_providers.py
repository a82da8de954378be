"""The tracker per provider: one provider down stays that provider's, watches make the list a
slow resync, and a UID seen on two providers keeps both entries (the twin is found, not hidden)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tests.support import background, eventually
from tests.unit.pods.test_tracker import ListingProvider, PushingProvider, running
from vkprovider.errors import Transient
from vkprovider.models import DeploymentStatus, Phase, ProviderInfo
from vkprovider.pods.tracker import DeploymentTracker


class DownPlugin(ListingProvider):
    """A gRPC plugin in restart backoff: every call, ``info`` included, is Transient."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    async def info(self) -> ProviderInfo:
        raise Transient("plugin restarting")

    async def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        raise Transient("plugin restarting")
        yield  # pragma: no cover - makes this an async generator


async def test_one_plugin_down_does_not_stop_tracking_the_others() -> None:
    down, up = DownPlugin(), PushingProvider()
    changed: asyncio.Queue[str] = asyncio.Queue()
    tracker = DeploymentTracker(
        {"down": down, "up": up},  # type: ignore[dict-item]
        "vk",
        interval=0.05,
        on_change=changed.put_nowait,
    )
    async with background(tracker.run()) as task:
        up.pushes.put_nowait(running("u1"))
        async with asyncio.timeout(5):
            assert await changed.get() == "u1"

        async def down_seen_failing() -> bool:
            return down.calls >= 2

        await eventually(down_seen_failing, timeout=10)
        assert not task.done()  # the tracker survived the failing plugin
        assert tracker.unreachable_since("down") is not None
        assert tracker.unreachable_since("up") is None
        down.fail = False

        async def recovered() -> bool:
            return tracker.unreachable_since("down") is None

        await eventually(recovered, timeout=10)


async def test_a_watching_provider_is_listed_only_as_a_slow_resync() -> None:
    pushy, polled = PushingProvider(), ListingProvider()
    tracker = DeploymentTracker(
        {"pushy": pushy, "polled": polled},  # type: ignore[dict-item]
        "vk",
        interval=0.02,
        watch_resync=3600,
        on_change=lambda uid: None,
    )
    async with background(tracker.run()):

        async def polled_often() -> bool:
            return polled.calls >= 10

        await eventually(polled_often, timeout=10)
        assert pushy.calls <= 1  # at most the one poll before its stream was open


def test_a_uid_listed_on_two_providers_keeps_both_entries() -> None:
    tracker = DeploymentTracker({}, "vk", interval=1, on_change=lambda uid: None)
    tracker._apply("p", [running("u")], asked=tracker.clock())
    tracker._apply("q", [running("u")], asked=tracker.clock())
    assert tracker.get("u") is not None and tracker.get("u").provider == "p"  # type: ignore[union-attr]
    assert sorted(t.provider for _, t in tracker.entries("u")) == ["p", "q"]
    tracker._apply("q", [], asked=tracker.clock())  # gone from q: nothing left to clean up there
    assert [t.provider for _, t in tracker.entries("u")] == ["p"]


def test_recording_on_another_provider_keeps_the_old_deployment_visible() -> None:
    tracker = DeploymentTracker({}, "vk", interval=1, on_change=lambda uid: None)
    tracker.record("u", "p", running("u"))  # e.g. a create that answered late
    tracker.record("u", "q", running("u"))  # the placement that won
    assert tracker.get("u").provider == "q"  # type: ignore[union-attr]
    assert sorted(t.provider for _, t in tracker.entries()) == ["p", "q"]
    tracker.forget("u", "q")
    assert tracker.get("u").provider == "p"  # type: ignore[union-attr]  # the other is promoted
    tracker.forget("u", "p")
    assert tracker.get("u") is None and list(tracker.entries()) == []


def test_a_twin_pushed_by_a_watch_is_kept_until_it_ends() -> None:
    tracker = DeploymentTracker({}, "vk", interval=1, on_change=lambda uid: None)
    tracker.record("u", "p", running("u"))
    tracker._apply_pushed("q", running("u"))  # a watch-only provider announces a second deployment
    assert sorted(t.provider for _, t in tracker.entries("u")) == ["p", "q"]
    tracker._apply_pushed("q", DeploymentStatus(uid="u", phase=Phase.SUCCEEDED))
    assert [t.provider for _, t in tracker.entries("u")] == ["p"]


class BuggyAdapter(ListingProvider):
    async def list(self, node_name: str) -> list[DeploymentStatus]:
        raise KeyError("a bug in the adapter")


async def test_an_adapter_bug_in_list_does_not_fail_the_initial_sync() -> None:
    ok = ListingProvider()
    ok.statuses = {"u": running("u")}
    tracker = DeploymentTracker(
        {"buggy": BuggyAdapter(), "ok": ok},  # type: ignore[dict-item]
        "vk",
        interval=1,
        on_change=lambda uid: None,
    )
    await tracker.poll_once()  # must not raise: the controller's term waits on it
    assert tracker.get("u") is not None
    assert tracker.unreachable_since("buggy") is not None


async def test_an_api_outage_behind_an_open_watch_is_listed_when_the_probes_see_it() -> None:
    """With the stream open lists are a slow resync; the node agent's probes flipping the
    provider's reachability (``recheck``) make the tracker list at once, both ways."""
    provider = PushingProvider()
    tracker = DeploymentTracker(
        {"p": provider},  # type: ignore[dict-item]
        "vk",
        interval=0.02,
        watch_resync=3600,
        on_change=lambda uid: None,
    )
    async with background(tracker.run()):

        async def streaming() -> bool:
            return "p" in tracker._streaming

        await eventually(streaming, timeout=10)
        listed = provider.calls
        await asyncio.sleep(0.2)  # ten poll intervals: the open stream makes lists a slow resync
        assert provider.calls == listed
        provider.fail = True  # the API fails; the stream stays open
        tracker.recheck("p", False)

        async def unreachable() -> bool:
            return tracker.unreachable_since("p") is not None

        await eventually(unreachable, timeout=10)
        provider.fail = False
        tracker.recheck("p", True)

        async def back() -> bool:
            return tracker.unreachable_since("p") is None  # a list clears it once the API answers

        await eventually(back, timeout=10)
