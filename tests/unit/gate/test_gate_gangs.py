"""Kueue's pending gangs that it admits next hold their GPUs before the wave marks any replica:
a gang the queue has room for keeps replicas out of its GPUs, one over the quota does not, and
without Kueue the wave is unchanged."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.unit.gate.test_gate_fit import node, vk
from tests.unit.gate.test_gate_wave import PINS, planner, replica
from vkprovider.gate.gangs import Gang, admitted_next
from vkprovider.gate.kueue_view import KueueView
from vkprovider.kube.errors import KubeNotFound

JSON = dict[str, Any]
LOCAL_QUEUES = {"ns/lq": {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}}


def workload(
    name: str,
    count: int = 2,
    gpus: int = 1,
    *,
    priority: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    conditions: list[JSON] | None = None,
    queue: str = "lq",
) -> JSON:
    template = {
        "metadata": {"labels": {"job-name": name}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    spec: JSON = {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": template}]}
    if priority is not None:
        spec["priority"] = priority
    meta = {"name": name, "namespace": "ns", "creationTimestamp": created}
    return {"metadata": meta, "spec": spec, "status": {"conditions": conditions or []}}


def cluster_queue(nominal: int, used: int = 0, *, strategy: str = "BestEffortFIFO", **spec: Any) -> JSON:
    resources = [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]
    return {
        "metadata": {"name": "cq"},
        "spec": {
            "queueingStrategy": strategy,
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "local-gpu", "resources": resources}],
                }
            ],
            **spec,
        },
        "status": {
            "conditions": [{"type": "Active", "status": "True"}],
            "flavorsUsage": [
                {"name": "local-gpu", "resources": [{"name": "nvidia.com/gpu", "total": str(used)}]}
            ],
        },
    }


def gangs(*workloads: JSON, cq: JSON, live: set[str] | None = None) -> list[Gang]:
    return admitted_next(workloads, {"cq": cq}, LOCAL_QUEUES, live or set())


def names(found: list[Gang]) -> list[str]:
    return [g.workload for g in found]


def test_a_gang_the_queue_has_room_for_keeps_a_replica_out_of_its_gpus() -> None:
    nodes, out = [node("a", 2), vk()], [replica("r1"), replica("r2", price=0.5)]
    assert planner().plan(nodes, out, 0.0, PINS).wave == ["ns/r1", "ns/r2"]  # without the gang
    pending = gangs(workload("train", count=1), cq=cluster_queue(nominal=4, used=2))
    assert names(pending) == ["ns/train"] and pending[0].flavor == "local-gpu"
    plan = planner().plan(nodes, out, 0.0, PINS, gangs=pending)
    assert plan.wave == ["ns/r1"] and plan.gangs == ["ns/train"]
    assert plan.stay == {"ns/r2": "Insufficient nvidia.com/gpu: a"}


def test_a_gang_over_the_queues_quota_reserves_nothing() -> None:
    nodes, out = [node("a", 2), vk()], [replica("r1"), replica("r2", price=0.5)]
    pending = gangs(workload("train", count=3), cq=cluster_queue(nominal=4, used=2))
    assert pending == []
    assert planner().plan(nodes, out, 0.0, PINS, gangs=pending).wave == ["ns/r1", "ns/r2"]


def test_a_gang_that_fits_no_local_node_reserves_nothing() -> None:
    nodes, out = [node("a", 2), vk()], [replica("r1"), replica("r2", price=0.5)]
    pending = gangs(workload("big", count=3), cq=cluster_queue(nominal=8))  # 3 GPUs, 2 local
    assert names(pending) == ["ns/big"]
    plan = planner().plan(nodes, out, 0.0, PINS, gangs=pending)
    assert plan.wave == ["ns/r1", "ns/r2"] and plan.gangs == []  # not even part of it


def test_finished_inactive_and_foreign_workloads_are_not_pending() -> None:
    cq = cluster_queue(nominal=8)
    finished = workload("finished", conditions=[{"type": "Finished", "status": "True"}])
    inactive = workload("inactive")
    inactive["spec"]["active"] = False
    elsewhere = workload("elsewhere", queue="other")
    evicted = workload("evicted", conditions=[{"type": "QuotaReserved", "status": "False"}])
    assert names(gangs(finished, inactive, elsewhere, evicted, cq=cq)) == ["ns/evicted"]


def test_a_held_or_inactive_queue_admits_nothing() -> None:
    assert gangs(workload("w"), cq=cluster_queue(nominal=8, stopPolicy="Hold")) == []
    inactive = cluster_queue(nominal=8)
    inactive["status"]["conditions"] = [{"type": "Active", "status": "False", "reason": "FlavorNotFound"}]
    assert gangs(workload("w"), cq=inactive) == []
    held_local = {"ns/lq": {**LOCAL_QUEUES["ns/lq"], "spec": {"clusterQueue": "cq", "stopPolicy": "Hold"}}}
    assert admitted_next([workload("w")], {"cq": cluster_queue(nominal=8)}, held_local) == []


def test_a_gang_with_quota_whose_pods_do_not_exist_yet_is_reserved_until_they_do() -> None:
    full = cluster_queue(nominal=2, used=2)  # its own usage: no room check for it
    reserved = workload("reserved", conditions=[{"type": "QuotaReserved", "status": "True"}])
    reserved["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "reserved", "uid": "job-1"}]
    admitted = workload("admitted", conditions=[{"type": "Admitted", "status": "True"}])
    admitted["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "admitted", "uid": "job-2"}]
    assert names(gangs(reserved, admitted, cq=full)) == ["ns/reserved", "ns/admitted"]
    assert names(gangs(reserved, admitted, cq=full, live={"job-2"})) == ["ns/reserved"]
    nodes, out = [node("a", 2), vk()], [replica("r1")]
    plan = planner().plan(nodes, out, 0.0, PINS, gangs=gangs(reserved, cq=full))
    assert plan.wave == [] and plan.gangs == ["ns/reserved"]


def test_the_queue_admits_in_priority_order_while_its_quota_lasts() -> None:
    cq = cluster_queue(nominal=4)  # room for 4 GPUs
    first = workload("first", count=2, created="2026-01-01T00:00:01Z")
    urgent = workload("urgent", count=3, priority=100, created="2026-01-01T00:00:05Z")
    small = workload("small", count=1, created="2026-01-01T00:00:09Z")
    # urgent (3) first; first (2) no longer fits; BestEffortFIFO tries small (1)
    assert names(gangs(first, urgent, small, cq=cq)) == ["ns/urgent", "ns/small"]
    strict = cluster_queue(nominal=4, strategy="StrictFIFO")
    assert names(gangs(first, urgent, small, cq=strict)) == ["ns/urgent"]


def test_reservations_use_the_larger_of_usage_and_reservation() -> None:
    cq = cluster_queue(nominal=4, used=1)
    cq["status"]["flavorsReservation"] = [
        {"name": "local-gpu", "resources": [{"name": "nvidia.com/gpu", "total": "3"}]}
    ]
    assert gangs(workload("two", count=2), cq=cq) == []
    assert names(gangs(workload("one", count=1), cq=cq)) == ["ns/one"]


class Discovery:
    """The apiserver without Kueue: discovery of its group is a 404; anything else is a bug."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> JSON:
        self.paths.append(path)
        if path == "/apis/kueue.x-k8s.io/v1beta2":
            raise KubeNotFound(404, "the server could not find the requested resource")
        raise AssertionError(f"unexpected {method} {path}")


async def test_without_kueue_nothing_is_watched_and_the_wave_reads_no_gangs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="vkprovider.gate.kueue_view")
    kube = Discovery()
    view = KueueView(kube, handler=lambda *_: None, probe_seconds=0.01)  # type: ignore[arg-type]
    assert view.gangs() is None  # discovery not answered yet: the wave waits
    task = asyncio.create_task(view.run())
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(kube.paths) >= 3:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert set(kube.paths) == {"/apis/kueue.x-k8s.io/v1beta2"} and len(kube.paths) >= 3
    assert view.installed is False and view.gangs() == []
    said = [r for r in caplog.records if "Kueue" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "INFO"  # one line, however often it looks


def test_caches_that_never_sync_stop_holding_the_wave_after_the_grace() -> None:
    view = KueueView(object(), handler=lambda *_: None, sync_grace_seconds=0.0)  # type: ignore[arg-type]
    view.installed = True
    assert view.gangs() == []
    waiting = KueueView(object(), handler=lambda *_: None, sync_grace_seconds=3600)  # type: ignore[arg-type]
    waiting.installed = True
    assert waiting.gangs() is None
