"""Capacity and probes, read from a real Placer over real in-process providers."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.node_fakes import SwitchableProvider, offer
from vkprovider.config import NodeConfig
from vkprovider.node.capacity import current_capacity
from vkprovider.node.manifest import NodeState
from vkprovider.node.probe import Prober
from vkprovider.node.status import NodeObject
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.service import Placer
from vkprovider.placement.types import PodContext


def _providers() -> dict[str, SwitchableProvider]:
    return {
        "cheap": SwitchableProvider(
            "cheap", [offer("cheap", "h1", "H100-SXM-80GB", 8, 2), offer("cheap", "l4", "L4-24GB", 1, 5)]
        ),
        "dear": SwitchableProvider(
            "dear", [offer("dear", "a1", "A100-SXM-80GB", 2, 3), offer("dear", "x", "L4-24GB", 4, 0)]
        ),
    }


async def test_gpus_are_capacity_times_count_over_usable_providers() -> None:
    providers = _providers()
    placer = Placer(providers, PlacementConfig(breaker_seconds=0.05))
    await placer.refresh()
    cap = current_capacity(placer)
    assert cap.gpus == 8 * 2 + 1 * 5 + 2 * 3 + 4 * 0
    assert cap.gpu_types == {"H100-SXM-80GB", "L4-24GB", "A100-SXM-80GB"}
    assert cap.max_per_pod == 8  # the 8 x H100 offer: the most one pod can get
    assert not cap.breaker_open

    prober = Prober(providers, placer.health, timeout=0.5)
    providers["dear"].healthy = False
    assert await prober.probe_all()  # one provider is enough
    assert current_capacity(placer).gpus == 8 * 2 + 1 * 5 + 2 * 3  # one failed probe: a blip
    assert await prober.probe_all()
    assert current_capacity(placer).gpus == 8 * 2 + 1 * 5  # an unreachable provider sells nothing
    assert "Transient" in prober.errors["dear"] and prober.errors["cheap"] == ""

    providers["cheap"].healthy = False
    assert not await prober.probe_all()
    assert "cheap:" in prober.down_message() and "dear:" in prober.down_message()
    await asyncio.sleep(0.06)
    cap = current_capacity(placer)
    assert cap.breaker_open and cap.gpus == 0
    assert cap.gpu_types == {"H100-SXM-80GB", "L4-24GB", "A100-SXM-80GB"}  # labels do not flap with health
    assert cap.max_per_pod == 8

    providers["cheap"].healthy = True
    assert await prober.probe_all()
    assert not current_capacity(placer).breaker_open


async def test_a_hung_probe_times_out_without_delaying_the_others() -> None:
    providers = _providers()
    providers["dear"].hang = True
    placer = Placer(providers)
    prober = Prober(providers, placer.health, timeout=0.1)
    async with asyncio.timeout(5):
        assert await prober.probe_all()
        assert await prober.probe_all()  # failed twice in a row: unreachable
    assert "timed out" in prober.errors["dear"]
    assert (
        placer.health.unusable_reason("dear") is not None and placer.health.unusable_reason("cheap") is None
    )


async def test_no_providers_means_not_ready() -> None:
    prober = Prober({}, Placer({}).health)
    assert not await prober.probe_all()
    assert prober.down_message() == "no providers configured"


def test_metadata_patch_is_scoped_to_owned_labels_and_taints() -> None:
    obj = NodeObject(None, NodeConfig(name="vk-a"))  # type: ignore[arg-type]  # no I/O here
    obj.node = {
        "metadata": {
            "name": "vk-a",
            "resourceVersion": "42",
            "labels": {
                "type": "virtual-kubelet",
                "kubernetes.io/role": "agent",
                "kubernetes.io/hostname": "vk-a",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": "vkprovider-external",
                "gpu.vkprovider.io/L4": "true",
                "gpu.vkprovider.io/OLD": "true",
                "someone.else/label": "x",
            },
        },
        "spec": {
            "taints": [
                {"key": "local-capacity", "value": "available", "effect": "NoSchedule"},
                {"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"},
            ]
        },
    }
    assert obj.metadata_patch(NodeState(ready=True, gpus=1, gpu_types=frozenset({"L4", "OLD"}))) is None

    patch = obj.metadata_patch(NodeState(ready=True, gpus=0, gpu_types=frozenset({"L4"}), breaker_open=True))
    assert patch is not None
    assert patch["metadata"] == {"labels": {"gpu.vkprovider.io/OLD": None}, "resourceVersion": "42"}
    assert [t["key"] for t in patch["spec"]["taints"]] == [
        "local-capacity",
        "virtual-kubelet.io/provider",
        "vkprovider.io/unavailable",
    ]


def _pod(uid: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"uid": uid},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": phase},
    }


async def test_allocatable_is_free_plus_what_this_nodes_placed_pods_hold() -> None:
    placer = Placer(_providers())
    await placer.refresh()
    free = 8 * 2 + 1 * 5 + 2 * 3
    ctx = PodContext(namespace="ns")
    placer.adopt("big", ctx, "cheap", offer_id="h1")  # an 8-GPU offer
    placer.adopt("pair", ctx, "dear", offer_id="a1")  # a 2-GPU offer
    cap = current_capacity(placer)  # a bare agent: each placement holds its offer's GPUs
    assert (cap.free, cap.held, cap.gpus) == (free, 8 + 2, free + 10)

    pods = [
        _pod("big", 8),
        _pod("pair", 1),  # a 1-GPU pod on a 2-GPU offer: the scheduler subtracts 1, so count 1
        _pod("waiting", 4),  # bound but not placed anywhere yet: holds nothing
        _pod("done", 2, phase="Succeeded"),
    ]
    placer.adopt("done", ctx, "dear", offer_id="a1")
    cap = current_capacity(placer, lambda: pods)
    assert (cap.held, cap.gpus) == (8 + 1, free + 9)
    assert current_capacity(placer, lambda: pods, cap=20).gpus == 20  # node.max_gpus caps it

    placer.release("big")
    assert current_capacity(placer, lambda: pods).held == 1


async def test_reachability_names_unreachable_providers_in_order() -> None:
    providers = _providers()
    placer = Placer(providers)
    prober = Prober(providers, placer.health, timeout=0.5)
    providers["dear"].healthy = False
    await prober.probe_all()
    # one failed probe is a flaky API: placement still uses it, and the condition says the same
    assert prober.reachability().unreachable == ()
    await prober.probe_all()
    reach = prober.reachability()
    assert (reach.reachable, reach.unreachable) == (("cheap",), ("dear",))
    assert "backend unreachable" in dict(reach.errors)["dear"]
