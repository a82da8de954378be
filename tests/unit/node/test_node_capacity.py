"""Capacity and probes, read from a real Placer over real in-process providers."""

from __future__ import annotations

import asyncio

from tests.node_fakes import SwitchableProvider, offer
from vkprovider.config import NodeConfig
from vkprovider.node.capacity import current_capacity
from vkprovider.node.manifest import NodeState
from vkprovider.node.probe import Prober
from vkprovider.node.status import NodeObject
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.service import Placer


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
    assert not cap.breaker_open

    prober = Prober(providers, placer.health, timeout=0.5)
    providers["dear"].healthy = False
    assert await prober.probe_all()  # one provider is enough
    assert current_capacity(placer).gpus == 8 * 2 + 1 * 5  # an unreachable provider sells nothing
    assert "Transient" in prober.errors["dear"] and prober.errors["cheap"] == ""

    providers["cheap"].healthy = False
    assert not await prober.probe_all()
    assert "cheap:" in prober.down_message() and "dear:" in prober.down_message()
    await asyncio.sleep(0.06)
    cap = current_capacity(placer)
    assert cap.breaker_open and cap.gpus == 0
    assert cap.gpu_types == {"H100-SXM-80GB", "L4-24GB", "A100-SXM-80GB"}  # labels do not flap with health

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
