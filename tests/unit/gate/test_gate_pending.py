"""The Pending rule counts only pods that the gate's taint is what keeps out: Kubernetes'
selector semantics, no DaemonSet pods, demand that fits the virtual node, and a ceiling."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.gate.gate_fakes import VK_TOLERATION, pod, virtual_node
from vkprovider.gate.affinity import node_affinity_admits as admits
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.pending import blocked_by_gate
from vkprovider.gate.pending_hold import HoldCeiling
from vkprovider.gate.podspec import pod_requests as demand
from vkprovider.gate.room import Room

CFG = TaintConfig()


def vk(gpus: int = 8, **allocatable: str) -> dict[str, Any]:
    node = virtual_node(taints=[CFG.as_taint()])
    node["status"]["allocatable"] = {"nvidia.com/gpu": str(gpus), **allocatable}
    return node


def pending(name: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    p = pod(name, gpus, phase="Pending", unschedulable=True, tolerations=[VK_TOLERATION])
    p["spec"].update(spec)
    return p


def required(*terms: Any) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


@pytest.mark.parametrize(
    ("terms", "admitted"),
    [
        ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}]}], True),
        ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-0"]}]}], False),
        ([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-0"]}]}], True),
        ([{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}], False),  # only In/NotIn
        ([{}], False),  # an empty term matches nothing
        ([None], False),  # so does a null one
        (
            [{}, {"matchExpressions": [{"key": "type", "operator": "In", "values": ["virtual-kubelet"]}]}],
            True,
        ),
        ([{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["local-gpu"]}]}], True),
        ([{"matchExpressions": [{"key": "pool", "operator": "Exists"}]}], False),
        ([{"matchExpressions": [{"key": "type", "operator": "Bogus", "values": ["x"]}]}], False),
    ],
)
def test_required_node_affinity_follows_the_api(terms: list[Any], admitted: bool) -> None:
    assert admits(pending("p", affinity=required(*terms)), vk()) is admitted


def test_a_matchfields_daemonset_pod_and_a_pod_pinned_elsewhere_never_count() -> None:
    pinned = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-0"]}]}
    ds = pending("ds-agent", 0, affinity=required(pinned))
    ds["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent", "controller": True}]
    ds_here = pending("ds-here", 0)  # even one that would fit: a DaemonSet pod is never a burst candidate
    ds_here["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent"}]
    assert blocked_by_gate([ds, ds_here, pending("burstable")], vk(), CFG) == ["ns/burstable"]


def test_a_pod_bigger_than_the_virtual_node_offers_does_not_count() -> None:
    node = vk(8, cpu="16", memory="64Gi", pods="110")
    running = pod("running", 6, node_name="vk")
    big = pending("sixteen", 16)
    two = pending("two", 2)  # fits the 2 left after the running pod
    three = pending("three", 3)  # does not
    hungry = pending("hungry", 1)
    hungry["spec"]["containers"][0]["resources"]["requests"] = {"memory": "65Gi"}
    small = pending("small", 1)
    small["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "500m", "memory": "1Gi"}
    pods = [running, big, two, three, hungry, small]
    assert blocked_by_gate(pods, node, CFG) == ["ns/two", "ns/small"]


def test_a_pod_bigger_than_any_single_offer_does_not_count() -> None:
    """32 GPUs offered in all, but by 8-GPU machines: a 16-GPU pod fits none of them."""
    node = vk(32)
    node["metadata"]["labels"]["vkprovider.io/max-gpus-per-pod"] = "8"
    pods = [pending("sixteen", 16), pending("eight", 8)]
    assert blocked_by_gate(pods, node, CFG) == ["ns/eight"]
    del node["metadata"]["labels"]["vkprovider.io/max-gpus-per-pod"]  # no label: allocatable decides
    assert blocked_by_gate(pods, node, CFG) == ["ns/sixteen", "ns/eight"]


def test_demand_follows_the_scheduler() -> None:
    p = pending("x", 2)
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]
    p["spec"]["overhead"] = {"cpu": "250m"}
    got = demand(p)
    assert got["nvidia.com/gpu"] == 4 and str(got["cpu"]) == "0.250" and got["pods"] == 1
    full = vk(8, pods="1")
    assert not Room.of(full, [pod("there", 0, node_name="vk")]).fits(pending("y", 1))


async def test_one_pod_holds_the_taint_off_only_up_to_the_ceiling() -> None:
    class Events:
        recorded: list[tuple[Any, ...]] = []

        async def record(self, involved: Any, kind: str, reason: str, message: str) -> None:
            self.recorded.append((involved["name"], kind, reason, message))

    ceiling, events = HoldCeiling(300), Events()
    stuck, later = pending("stuck"), pending("later")
    assert await ceiling.admit([stuck], 0.0, events) == [stuck]  # type: ignore[arg-type]
    assert await ceiling.admit([stuck, later], 200.0, events) == [stuck, later]  # type: ignore[arg-type]
    assert await ceiling.admit([stuck, later], 300.0, events) == [later]  # type: ignore[arg-type]
    assert await ceiling.admit([stuck, later], 400.0, events) == [later]  # type: ignore[arg-type]
    ((name, kind, reason, message),) = events.recorded  # once, naming the pod and the setting
    assert (name, kind, reason) == ("stuck", "Warning", "GatePendingHoldExpired")
    assert "ns/stuck" in message and "pending_hold_max_seconds" in message
    assert await ceiling.admit([later], 450.0, events) == [later]  # type: ignore[arg-type]
    back = await ceiling.admit([stuck, later], 460.0, events)  # type: ignore[arg-type]
    assert back == [stuck, later]  # stuck left the set and came back: it starts from zero
