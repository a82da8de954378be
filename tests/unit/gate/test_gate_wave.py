"""The wave planner marks exactly the replicas whose replacements fit, dearest first, holds their
slots until the replacements bind, and backs a workload off when one did not come home."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.unit.gate.test_gate_fit import node, vk
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.wave import WavePlanner
from vkprovider.gate.wave_config import MARK_LABEL, ReturnHomeConfig

JSON = dict[str, Any]
RS = {"kind": "ReplicaSet", "name": "inf-abc", "uid": "rs-1", "controller": True}
PINS = {"rs-1": "", "rs-2": "", "sts-1": ""}


def replica(
    name: str,
    gpus: int = 1,
    *,
    on: str = "vk",
    price: float = 1.0,
    owner: JSON | None = RS,
    ready: bool = True,
    marked: bool = False,
    uid: str = "",
) -> JSON:
    labels = {"app": "inf", **({MARK_LABEL: "true"} if marked else {})}
    meta: JSON = {
        "name": name,
        "namespace": "ns",
        "uid": uid or name,
        "labels": labels,
        "annotations": {"vkprovider.io/placement": json.dumps({"chosen": {"price": price}})},
        "ownerReferences": [owner] if owner else [],
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    spec: JSON = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if on:
        spec["nodeName"] = on
    status: JSON = {"phase": "Running" if on else "Pending"}
    status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": meta, "spec": spec, "status": status}


def planner(**cfg: Any) -> WavePlanner:
    return WavePlanner(ReturnHomeConfig(**cfg), "vk", TaintConfig())


def names(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def test_dearest_first_sized_to_the_free_capacity() -> None:
    out = [replica("cheap", price=1.0), replica("dear", price=3.0), replica("mid", price=2.0)]
    plan = planner().plan([node("a", 2), vk()], out, 0.0, PINS)
    assert plan.wave == ["ns/dear", "ns/mid"] and names(plan.mark) == ["dear", "mid"]
    assert plan.stay == {"ns/cheap": "Insufficient nvidia.com/gpu: a"}
    assert plan.units == 2 and plan.applies


def test_never_jobs_bare_pods_cold_starting_pinned_or_tolerating() -> None:
    job = replica("job", owner={"kind": "Job", "name": "j", "uid": "j-1", "controller": True})
    bare = replica("bare", owner=None)
    cold = replica("cold", ready=False)
    pinned = replica("pinned", owner={**RS, "uid": "rs-2"})
    tolerant = replica("tolerant", owner={**RS, "uid": "rs-1"})
    tolerant["spec"]["tolerations"] = [{"key": "local-capacity", "operator": "Exists"}]
    plan = planner().plan(
        [node("a", 8), vk()], [job, bare, cold, pinned, tolerant], 0.0, {"rs-1": "", "rs-2": "vk"}
    )
    assert plan.mark == [] and plan.wave == [] and plan.units == 0
    assert plan.applies  # replicas are out: the taint follows what fits (nothing), not 8 free GPUs
    only_job = planner().plan([node("a", 8), vk()], [job], 0.0, PINS)
    assert not only_job.applies  # no replica out: the raw reading decides


def test_a_mark_that_no_longer_fits_is_removed() -> None:
    p = planner()
    out = [replica("r1", marked=True), replica("r2")]
    assert names(p.plan([node("a", 2), vk()], out, 0.0, PINS).mark) == ["r2"]
    training = replica("train", 2, on="a", owner=None)
    plan = p.plan([node("a", 2), vk()], [*out, training], 1.0, PINS)
    assert names(plan.unmark) == ["r1"] and plan.wave == [] and plan.units == 0


def test_an_evicted_replicas_slot_stays_reserved_until_its_replacement_binds() -> None:
    p = planner()
    nodes = [node("a", 1), vk()]
    r1, r2 = replica("r1"), replica("r2", price=0.5)
    assert p.plan(nodes, [r1, r2], 0.0, PINS).wave == ["ns/r1"]
    # r1 evicted (gone), replacement not yet created or Pending: r2 must not take its slot
    plan = p.plan(nodes, [r2], 1.0, PINS)
    assert plan.in_flight == ["ns/r1"] and plan.wave == [] and plan.units == 1
    pending = replica("r1-new", on="", uid="new-1")
    plan = p.plan(nodes, [r2, pending], 2.0, PINS)
    assert plan.in_flight == ["ns/r1"] and plan.wave == []
    # bound locally: the node accounts for it now; Ready: the flight is over
    bound = replica("r1-new", on="a", uid="new-1", ready=False)
    plan = p.plan(nodes, [r2, bound], 3.0, PINS)
    assert plan.in_flight == [] and plan.wave == [] and plan.units == 0 and p.flights
    plan = p.plan(nodes, [r2, replica("r1-new", on="a", uid="new-1")], 4.0, PINS)
    assert not p.flights and not plan.failures


def test_a_replacement_that_does_not_come_home_backs_its_workload_off() -> None:
    p = planner(come_home_seconds=10, backoff_seconds=100)
    nodes = [node("a", 1), vk()]
    p.plan(nodes, [replica("r1"), replica("r2")], 0.0, PINS)
    p.plan(nodes, [replica("r2"), replica("r1-new", on="", uid="n1")], 1.0, PINS)  # r1 left
    plan = p.plan(nodes, [replica("r2"), replica("r1-new", on="", uid="n1")], 12.0, PINS)
    (failure,) = plan.failures
    assert str(failure.owner) == "ReplicaSet ns/inf-abc" and "Pending" in failure.why
    assert plan.wave == []  # r2, same workload, backs off
    assert p.plan(nodes, [replica("r2")], 113.0, PINS).wave == ["ns/r2"]


def test_a_replacement_recreated_on_the_virtual_node_fails_at_once() -> None:
    p = planner()
    nodes = [node("a", 1), vk()]
    p.plan(nodes, [replica("r1")], 0.0, PINS)
    plan = p.plan(nodes, [replica("r1-new", uid="n1", ready=False)], 1.0, PINS)
    (failure,) = plan.failures
    assert "virtual node" in failure.why


def test_kueue_admitted_pods_take_their_capacity_first() -> None:
    gang = replica("gang-0", 1, on="", owner=None, uid="g0")
    gang["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    plan = planner().plan([node("a", 1), vk()], [replica("r1"), gang], 0.0, PINS)
    assert plan.wave == [] and plan.units == 0
    gang["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]  # not admitted yet
    assert planner().plan([node("a", 1), vk()], [replica("r1"), gang], 0.0, PINS).wave == ["ns/r1"]


def test_units_weigh_replicas_by_their_gpus() -> None:
    plan = planner().plan([node("a", 8), vk()], [replica("big", 4), replica("small", 1)], 0.0, PINS)
    assert plan.units == 5


def test_only_replicas_a_budget_covers_are_marked() -> None:
    pdb = {"spec": {"selector": {"matchLabels": {"app": "inf"}}}}
    other = {"spec": {"selector": {"matchLabels": {"app": "other"}}}}
    nodes = [node("a", 8), vk()]
    assert planner().plan(nodes, [replica("r1")], 0.0, PINS, {"ns": [pdb]}).wave == ["ns/r1"]
    plan = planner().plan(nodes, [replica("r1")], 0.0, PINS, {"ns": [other]})
    assert plan.wave == [] and plan.applies  # stays out: nothing would evict it
    assert planner(require_pdb=False).plan(nodes, [replica("r1")], 0.0, PINS, {"ns": []}).wave == ["ns/r1"]


def test_a_full_return_hands_the_decision_back_to_the_raw_reading() -> None:
    p = planner()
    nodes = [node("a", 8), vk()]
    assert p.plan(nodes, [replica("r1")], 0.0, PINS).applies
    leaving = replica("r1")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    bound = replica("r1-new", on="a", uid="n1", ready=False)
    plan = p.plan(nodes, [leaving, bound], 1.0, PINS)
    assert not plan.applies and plan.units == 0  # nothing owned is out any more
