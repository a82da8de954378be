"""Which nodes count toward the quota, and what they add up to."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from vkprovider.quota.capacity import in_pool, node_state, offered
from vkprovider.quota.config import QuotaConfig

RESOURCES = ["nvidia.com/gpu", "cpu", "memory"]


def node(name: str, *, ready: str = "True", gpus: str = "8", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"pool": "local-gpu"}},
        "spec": spec,
        "status": {
            "allocatable": {"nvidia.com/gpu": gpus, "cpu": "64", "memory": "512Gi"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def state(obj: dict[str, Any]) -> str:
    return node_state(obj, RESOURCES, ["node.kubernetes.io/maintenance"]).state


def test_a_ready_schedulable_node_is_healthy() -> None:
    assert state(node("a")) == "healthy"


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (node("a", unschedulable=True), "cordoned"),
        (node("a", ready="False"), "NotReady"),
        (node("a", ready="Unknown"), "NotReady"),
        (
            node("a", taints=[{"key": "node.kubernetes.io/maintenance", "effect": "NoSchedule"}]),
            "maintenance taint node.kubernetes.io/maintenance",
        ),
    ],
)
def test_unhealthy_nodes_say_why(obj: dict[str, Any], why: str) -> None:
    assert state(obj) == why


def test_a_node_without_a_ready_condition_or_being_deleted_does_not_count() -> None:
    bare = node("a")
    bare["status"]["conditions"] = []
    assert state(bare) == "NotReady"
    gone = node("b")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert state(gone) == "deleting"


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tainted(tolerations: list[dict[str, Any]], *taints: dict[str, str]) -> str:
    obj = node("a", taints=list(taints))
    return node_state(obj, RESOURCES, ["node.kubernetes.io/maintenance"], tolerations).state


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_a_foreign_no_schedule_or_no_execute_taint_takes_the_node_out() -> None:
    gpu = taint("nvidia.com/gpu", value="present")
    assert tainted([], gpu) == "untolerated taint nvidia.com/gpu=present:NoSchedule"
    assert (
        tainted([], taint("dedicated", "NoExecute", "infra")) == "untolerated taint dedicated=infra:NoExecute"
    )


def test_a_taint_the_flavors_workloads_tolerate_still_counts() -> None:
    gpu = taint("nvidia.com/gpu", value="present")
    assert tainted([GPU_TOLERATION], gpu) == "healthy"
    assert tainted([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}], gpu) == "healthy"
    assert tainted([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "other"}], gpu).startswith(
        "untolerated"
    )
    assert tainted([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], gpu).startswith(
        "untolerated"
    )
    assert tainted([{"operator": "Exists"}], gpu, taint("dedicated", "NoExecute")) == "healthy"


def test_prefer_no_schedule_taints_do_not_take_a_node_out() -> None:
    assert tainted([], taint("example.com/soft", "PreferNoSchedule")) == "healthy"


@pytest.mark.parametrize(
    ("key", "effect", "why"),
    [
        ("ToBeDeletedByClusterAutoscaler", "NoSchedule", "autoscaler taint ToBeDeletedByClusterAutoscaler"),
        (
            "DeletionCandidateOfClusterAutoscaler",
            "PreferNoSchedule",
            "autoscaler taint DeletionCandidateOfClusterAutoscaler",
        ),
        ("node.kubernetes.io/out-of-service", "NoExecute", "out-of-service taint"),
        (
            "node.kubernetes.io/maintenance",
            "PreferNoSchedule",
            "maintenance taint node.kubernetes.io/maintenance",
        ),
    ],
)
def test_a_leaving_node_never_counts_even_for_workloads_that_tolerate_everything(
    key: str, effect: str, why: str
) -> None:
    assert tainted([{"operator": "Exists"}], taint(key, effect)) == why


def test_pool_membership_is_by_labels() -> None:
    assert in_pool(node("a"), {"pool": "local-gpu"})
    virtual = node("vk")
    virtual["metadata"]["labels"] = {"type": "virtual-kubelet"}
    assert not in_pool(virtual, {"pool": "local-gpu"})


def test_offered_sums_healthy_nodes_minus_the_reserve_never_below_zero() -> None:
    states = [
        node_state(node("a"), RESOURCES, []),
        node_state(node("b", gpus="4"), RESOURCES, []),
        node_state(node("c", unschedulable=True), RESOURCES, []),
    ]
    got = offered(states, RESOURCES, {"nvidia.com/gpu": Decimal(2), "cpu": Decimal(1000)})
    assert got["nvidia.com/gpu"] == 10
    assert got["cpu"] == 0
    assert got["memory"] == 2 * 512 * 1024**3


def test_garbled_allocatable_offers_nothing_instead_of_crashing() -> None:
    bad = node("a", gpus="lots")
    assert node_state(bad, RESOURCES, []).allocatable["nvidia.com/gpu"] == 0


def test_config_names_the_bad_reserve_field() -> None:
    with pytest.raises(ValueError, match="cpu: invalid quantity"):
        QuotaConfig(cluster_queue="training", reserve={"cpu": "a lot"})
    with pytest.raises(ValueError, match="cluster_queue"):
        QuotaConfig.model_validate({})


def test_event_text_names_the_nodes_that_moved() -> None:
    from vkprovider.quota.reading import FlavorReading
    from vkprovider.quota.report import node_changes

    before = {"a": "healthy", "b": "healthy", "c": "cordoned"}
    now = [
        node_state(node("a", unschedulable=True), RESOURCES, []),
        node_state(node("c"), RESOURCES, []),
        node_state(node("d", ready="False"), RESOURCES, []),
    ]
    (target,) = QuotaConfig(cluster_queue="training").targets()
    reading = FlavorReading(target, now, {}, {}, {}, [])
    assert (
        node_changes(before, reading)
        == "a left (cordoned), b left (deleted), c joined (was cordoned), d not counted (NotReady)"
    )
