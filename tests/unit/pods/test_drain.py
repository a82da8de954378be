"""The drain before an external replica's deployment stops: the decision from the pod object and
the endpoints read back from the apiserver (pods/drain.py), and PodSync holding the provider
delete as a delayed requeue, across a restart, with the skips that must not wait."""

from __future__ import annotations

from typing import Any

from pod_sync_fakes import NODE, Clock, World, gpu_pod, world

from vkprovider.models import DeploymentEndpoints, Phase, PortMapping
from vkprovider.pods.context import Requeue
from vkprovider.pods.drain import drain_verdict
from vkprovider.pods.sync import SyncSettings
from vkprovider.traffic.config import TrafficConfig
from vkprovider.traffic.route import ANNOTATION_ROUTE, Route

JSON = dict[str, Any]
REQUESTED = 1_800_000_000.0  # 2027-01-15T08:00:00Z
READY = {"conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}
LIVE = [{"conditions": {"ready": True, "serving": True, "terminating": False}}]
TERMINATING = [{"conditions": {"ready": False, "serving": True, "terminating": True}}]
#: What pods/route.py records on a pod whose provider said how it is reached.
ROUTED = {
    ANNOTATION_ROUTE: Route(
        "cheap",
        "dep-1",
        DeploymentEndpoints(
            uid="uid-1", addresses=["198.18.7.1"], ports=[PortMapping(container_port=8000, port=38000)]
        ),
    ).dump()
}


def deleting(grace: int | None, *, status: JSON | None = None) -> JSON:
    """A pod deleted at REQUESTED with ``grace``: the apiserver sets deletionTimestamp = +grace."""
    pod = gpu_pod()
    stamp = f"2027-01-15T08:{(grace or 0) // 60:02d}:{(grace or 0) % 60:02d}Z"
    pod["metadata"].update(deletionTimestamp=stamp, deletionGracePeriodSeconds=grace, annotations=ROUTED)
    pod["status"] = status if status is not None else READY
    return pod


def test_the_drain_ends_at_the_grace_period_counted_from_the_delete_request() -> None:
    pod = deleting(10)
    verdict = drain_verdict(pod, TERMINATING, now=REQUESTED + 3, max_seconds=120)
    assert verdict.wait == 7 and verdict.until == REQUESTED + 10
    assert drain_verdict(pod, TERMINATING, now=REQUESTED + 10, max_seconds=120).stop_now


def test_the_cap_bounds_a_long_grace_period() -> None:
    pod = deleting(600)
    verdict = drain_verdict(pod, TERMINATING, now=REQUESTED + 1, max_seconds=120)
    assert verdict.until == REQUESTED + 120 and verdict.wait == 119
    assert drain_verdict(pod, TERMINATING, now=REQUESTED + 120, max_seconds=120).stop_now


def test_the_deployment_waits_until_the_terminating_endpoint_is_observed() -> None:
    pod = deleting(10)
    for seen in (LIVE, None):  # our write not read back yet; the slice cache not listed yet
        late = drain_verdict(pod, seen, now=REQUESTED + 11, max_seconds=120)
        assert not late.stop_now and "observed" in late.reason  # the grace is over, not the wait
    # ... but not beyond the cap: an unreachable apiserver must not keep a deployment billing.
    assert drain_verdict(pod, LIVE, now=REQUESTED + 120, max_seconds=120).stop_now
    assert drain_verdict(pod, None, now=REQUESTED + 120, max_seconds=120).stop_now


def test_nothing_to_drain_means_no_wait() -> None:
    cases = {
        "force delete": (deleting(0), TERMINATING),
        "never ready": (deleting(10, status={"phase": "Pending"}), TERMINATING),
        "deploy failed": (deleting(10, status={"phase": "Failed"}), TERMINATING),
        "not published": (deleting(10), []),
        "no route": ({**deleting(10), "metadata": {**deleting(10)["metadata"], "annotations": {}}}, None),
    }
    for name, (pod, endpoints) in cases.items():
        verdict = drain_verdict(pod, endpoints, now=REQUESTED, max_seconds=120)
        assert verdict.stop_now, name
    assert drain_verdict(deleting(10), TERMINATING, now=REQUESTED, max_seconds=0).stop_now
    # The provider says it ended already (the pod's Ready is merely not updated while deleting).
    assert drain_verdict(deleting(10), TERMINATING, now=REQUESTED, max_seconds=120, ended=True).stop_now


async def running(w: World) -> JSON:
    """Pod ``ns/p`` deployed (as uid-1) and Running at its provider, as PodSync has seen it."""
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    return pod


def delete_requested(w: World) -> None:
    """What the apiserver writes on ``ns/p`` for a delete at REQUESTED with a 10 s grace."""
    w.kube.update(
        "ns",
        "p",
        {
            "metadata": {
                "deletionTimestamp": "2027-01-15T08:00:10Z",
                "deletionGracePeriodSeconds": 10,
                "annotations": ROUTED,
            }
        },
    )


class Slices:
    """What the publisher's slice informer holds for each pod UID."""

    def __init__(self) -> None:
        self.by_uid: dict[str, list[JSON]] = {}

    def __call__(self, uid: str) -> list[JSON] | None:
        return self.by_uid.get(uid, [])


async def test_the_provider_delete_waits_for_the_drain_and_a_restart_resumes_it() -> None:
    slices, clock = Slices(), Clock(REQUESTED - 60)
    w = await world(clock=clock, endpoints=slices)
    pod = await running(w)
    slices.by_uid["uid-1"] = LIVE
    clock.now = REQUESTED + 1
    delete_requested(w)
    first = await w.run(pod)
    assert isinstance(first, Requeue) and 0 < first.after <= 1  # look again soon: not observed yet
    assert w.cloud.deletes == [] and "Draining" in w.kube.reasons()
    slices.by_uid["uid-1"] = TERMINATING
    held = await w.run(pod)
    assert held == Requeue(after=9.0) and w.cloud.deletes == []  # the rest of the grace period

    # A new process (restart, new leader) finds the same deadline on the pod.
    clock.now = REQUESTED + 4
    again = await world(clock=clock, endpoints=slices, kube=w.kube, cloud=w.cloud)
    await again.tracker.poll_once()
    assert await again.run(pod) == Requeue(after=6.0) and w.cloud.deletes == []
    clock.now = REQUESTED + 10
    assert await again.run(pod) is None
    assert w.cloud.deletes == [("uid-1", 0.0)]  # the grace was spent draining
    assert w.kube.pod("ns", "p") is None


async def test_a_pod_with_no_published_endpoint_or_no_publisher_is_stopped_at_once() -> None:
    for endpoints in (Slices(), None):
        clock = Clock(REQUESTED - 60)
        w = await world(clock=clock, endpoints=endpoints)
        pod = await running(w)
        clock.now = REQUESTED
        delete_requested(w)
        assert await w.run(pod) is None
        assert w.cloud.deletes == [("uid-1", 10.0)] and "Draining" not in w.kube.reasons()


async def test_draining_disabled_by_config_stops_at_once() -> None:
    slices, clock = Slices(), Clock(REQUESTED - 60)
    settings = SyncSettings(node_name=NODE, host_ip="127.0.0.1", traffic=TrafficConfig(drain_max_seconds=0))
    w = await world(clock=clock, endpoints=slices, settings=settings)
    pod = await running(w)
    slices.by_uid["uid-1"] = LIVE
    clock.now = REQUESTED
    delete_requested(w)
    assert await w.run(pod) is None and w.cloud.deletes == [("uid-1", 10.0)]
