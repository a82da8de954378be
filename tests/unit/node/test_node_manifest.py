"""The Node object the agent builds: labels, taints, capacity, status, conditions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from vkprovider.config import NodeConfig
from vkprovider.node.conditions import OWNED_TYPES, Reachability, build_conditions, condition_status
from vkprovider.node.manifest import (
    GPU_RESOURCE,
    KUBELET_VERSION,
    NodeState,
    build_node,
    gpu_label_key,
    merge_taints,
    node_labels,
    owned_taints,
)

LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        ("H100-SXM-80GB", "gpu.vkprovider.io/H100-SXM-80GB"),
        ("A100 80GB (PCIe)", "gpu.vkprovider.io/A100-80GB-PCIe"),
        ("  rtx_4090  ", "gpu.vkprovider.io/rtx_4090"),
        ("---", None),
        ("", None),
    ],
)
def test_gpu_label_key_is_a_valid_label_key(gpu: str, expected: str | None) -> None:
    assert gpu_label_key(gpu) == expected


def test_gpu_label_key_truncates_to_63_with_clean_ends() -> None:
    key = gpu_label_key("X" * 62 + "-/" + "Y" * 10)
    assert key is not None
    name = key.removeprefix("gpu.vkprovider.io/")
    assert len(name) <= 63 and LABEL_NAME.match(name)
    assert not name.endswith("-")


def test_labels_have_virtual_kubelet_identity_config_and_gpu_types() -> None:
    cfg = NodeConfig(name="vk-a", labels={"team": "inference"})
    labels = node_labels(cfg, ["H100-SXM-80GB", "L4"])
    assert labels["type"] == "virtual-kubelet"
    assert labels["kubernetes.io/role"] == "agent"
    assert labels["kubernetes.io/hostname"] == "vk-a"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["team"] == "inference"
    assert labels["gpu.vkprovider.io/H100-SXM-80GB"] == "true"
    assert labels["gpu.vkprovider.io/L4"] == "true"
    assert "vkprovider.io/max-gpus-per-pod" not in labels  # no offers listed: no claim
    assert node_labels(cfg, ["L4"], 8)["vkprovider.io/max-gpus-per-pod"] == "8"


def test_build_node_shape() -> None:
    cfg = NodeConfig(name="vk-a", internal_ip="10.1.2.3", kubelet_port=10555, max_pods=500)
    state = NodeState(ready=True, gpus=12, gpu_types=frozenset({"L4"}))
    node = build_node(cfg, state, build_conditions(True, "", NOW, reachability=Reachability(("a",))))
    assert node["metadata"]["name"] == "vk-a"
    assert node["spec"]["taints"] == [
        {"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"}
    ]
    status = node["status"]
    assert status["capacity"] == status["allocatable"]
    assert status["capacity"][GPU_RESOURCE] == "12"
    assert status["capacity"]["pods"] == "500"
    assert {"type": "InternalIP", "address": "10.1.2.3"} in status["addresses"]
    assert {"type": "Hostname", "address": "vk-a"} in status["addresses"]
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10555
    info = status["nodeInfo"]
    assert (info["kubeletVersion"], info["operatingSystem"], info["architecture"]) == (
        KUBELET_VERSION,
        "linux",
        "amd64",
    )
    conds = status["conditions"]
    assert [c["type"] for c in conds] == list(OWNED_TYPES)
    assert condition_status(conds, "Ready") == "True"
    assert all(c["status"] == "False" for c in conds if c["type"] not in ("Ready", "ProvidersReachable"))
    assert condition_status(conds, "ProvidersReachable") == "True"
    ready = next(c for c in conds if c["type"] == "Ready")
    assert ready["reason"] == "KubeletReady"
    assert ready["lastHeartbeatTime"] == "2026-01-02T03:04:05Z"


def test_breaker_adds_unavailable_taint() -> None:
    keys = [t["key"] for t in owned_taints(True)]
    assert keys == ["virtual-kubelet.io/provider", "vkprovider.io/unavailable"]
    assert all(t["effect"] == "NoSchedule" for t in owned_taints(True))


def test_merge_taints_touches_only_owned_keys() -> None:
    foreign = [
        {"key": "local-capacity", "value": "available", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
    ]
    ours_old = {
        "key": "virtual-kubelet.io/provider",
        "value": "vkprovider",
        "effect": "NoSchedule",
        "timeAdded": "t0",
    }
    unavailable = {"key": "vkprovider.io/unavailable", "value": "true", "effect": "NoSchedule"}
    current = [foreign[0], ours_old, unavailable, foreign[1]]

    closed = merge_taints(current, owned_taints(False))
    assert closed == [foreign[0], ours_old, foreign[1]]  # order kept; unchanged taint keeps timeAdded
    assert merge_taints(closed, owned_taints(False)) == closed  # nothing to write

    reopened = merge_taints(closed, owned_taints(True))
    assert reopened == [*closed, unavailable]
    assert merge_taints(reopened, owned_taints(True)) == reopened  # idempotent


def test_conditions_keep_transition_time_unless_status_flips() -> None:
    earlier = NOW - timedelta(hours=1)
    first = [c.to_json() for c in build_conditions(True, "", earlier)]
    first.append({"type": "ExampleCondition", "status": "True"})
    again = {c.type: c for c in build_conditions(True, "", NOW, first)}
    assert again["Ready"].transition == earlier and again["Ready"].heartbeat == NOW
    assert again["DiskPressure"].transition == earlier
    assert "ExampleCondition" not in again

    # A provider outage flips ProvidersReachable only: Ready (and its transition) stay put.
    outage = Reachability(reachable=(), unreachable=("a", "b"), errors=(("a", "Transient: 503"),))
    down = {c.type: c for c in build_conditions(True, "", NOW, first, reachability=outage)}
    assert down["Ready"].status == "True" and down["Ready"].transition == earlier
    reach = down["ProvidersReachable"]
    assert (reach.status, reach.reason) == ("False", "ProvidersUnreachable")
    assert "a (Transient: 503)" in reach.message and "b (probe failed)" in reach.message
    assert down["MemoryPressure"].transition == earlier


def test_reachability_condition_names_the_providers() -> None:
    assert Reachability(("a", "b")).condition()[:2] == ("True", "ProvidersReachable")
    status, reason, message = Reachability(("b",), ("a",), (("a", "timed out"),)).condition()
    assert (status, reason) == ("False", "ProviderUnreachable")
    assert message.startswith("unreachable: a (timed out); reachable: b")
    assert Reachability().condition()[:2] == ("False", "NoProviders")
    # Equality ignores the error text: a changing message is no reason to write.
    assert Reachability(("b",), ("a",), (("a", "x"),)) == Reachability(("b",), ("a",), (("a", "y"),))


def test_the_node_is_in_a_zone_of_its_own_unless_configured_otherwise() -> None:
    zone = "topology.kubernetes.io/zone"
    assert node_labels(NodeConfig(name="vk-a"), [])[zone] == "vkprovider-external"
    assert node_labels(NodeConfig(name="vk-a", zone="gpu-cloud"), [])[zone] == "gpu-cloud"
    assert zone not in node_labels(NodeConfig(name="vk-a", zone=""), [])
    explicit = NodeConfig(name="vk-a", labels={zone: "eu-west-1a"})
    assert node_labels(explicit, [])[zone] == "eu-west-1a" == explicit.topology_zone()
    assert NodeConfig(name="vk-a", zone="").topology_zone() is None
