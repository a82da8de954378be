"""Backend failure against the real node-lifecycle controller, and the circuit breaker's
capacity and taint (DESIGN §4.2, §5.5)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_node_fakes import (
    add_foreign_taint,
    condition,
    eventually,
    kube_client,
    node,
    node_config,
    running_agent,
    taint_keys,
    wait_for_probes,
)
from tests.node_fakes import SwitchableProvider, offer
from vkprovider.devcluster import Cluster
from vkprovider.kube import resources
from vkprovider.placement.config import PlacementConfig

pytestmark = pytest.mark.cluster

LOCAL_CAPACITY = {"key": "local-capacity", "value": "available", "effect": "NoSchedule"}


def _providers() -> dict[str, SwitchableProvider]:
    return {
        "a": SwitchableProvider("a", [offer("a", "h100", "H100-SXM-80GB", 2, 3)]),
        "b": SwitchableProvider("b", [offer("b", "l4", "L4-24GB", 1, 4)]),
    }


def _set_healthy(providers: dict[str, SwitchableProvider], healthy: bool) -> None:
    for provider in providers.values():
        provider.healthy = healthy


async def test_backend_down_lets_the_lease_lapse_and_the_controller_marks_the_node_unreachable(
    cluster: Cluster,
) -> None:
    cfg = node_config()
    providers = _providers()
    async with kube_client(cluster) as kube, running_agent(kube, cfg, providers) as agent:
        providers["a"].healthy = False  # one provider down is not the backend down
        await wait_for_probes(providers["a"])
        got = await node(kube, cfg.name)
        assert condition(got, "Ready")["status"] == "True"  # type: ignore[index]

        _set_healthy(providers, False)

        async def said_not_ready() -> bool:
            ready = condition(await node(kube, cfg.name), "Ready")
            return ready is not None and ready["status"] == "False"

        await eventually(said_not_ready, timeout=20)
        ready = condition(await node(kube, cfg.name), "Ready")
        assert ready is not None and ready["reason"] == "ProvidersUnreachable"
        assert "every provider's probe failed" in ready["message"]

        # The real node-lifecycle controller (grace period 10 s) sees neither lease renewals nor
        # heartbeats, so it takes the node to Unknown and taints it unreachable.
        async def unreachable() -> bool:
            got = await node(kube, cfg.name)
            cond = condition(got, "Ready")
            return (
                cond is not None
                and cond["status"] == "Unknown"
                and "node.kubernetes.io/unreachable" in taint_keys(got)
            )

        await eventually(unreachable, timeout=60)
        renewals = agent.lease.renewals
        lease = await resources.get_lease(kube, "kube-node-lease", cfg.name)
        assert lease is not None
        await wait_for_probes(providers["b"])
        assert agent.lease.renewals == renewals  # still not renewing while down
        again = await resources.get_lease(kube, "kube-node-lease", cfg.name)
        assert again is not None and again["spec"]["renewTime"] == lease["spec"]["renewTime"]

        providers["b"].healthy = True

        async def ready_again() -> bool:
            got = await node(kube, cfg.name)
            cond = condition(got, "Ready")
            return (
                cond is not None
                and cond["status"] == "True"
                and "node.kubernetes.io/unreachable" not in taint_keys(got)
            )

        await eventually(ready_again, timeout=60)

        async def lease_renewed() -> bool:
            latest = await resources.get_lease(kube, "kube-node-lease", cfg.name)
            return latest is not None and latest["spec"]["renewTime"] > lease["spec"]["renewTime"]

        await eventually(lease_renewed, timeout=20)


async def test_breaker_zeroes_gpus_and_taints_the_node_and_keeps_foreign_taints(cluster: Cluster) -> None:
    cfg = node_config()
    providers = _providers()
    placement = PlacementConfig(breaker_seconds=0.5)
    async with kube_client(cluster) as kube, running_agent(kube, cfg, providers, placement):
        await add_foreign_taint(kube, cfg.name, LOCAL_CAPACITY)
        full = str(2 * 3 + 1 * 4)

        def check(got: dict[str, Any]) -> tuple[str, list[str]]:
            keys = taint_keys(got)
            assert LOCAL_CAPACITY in got["spec"]["taints"], "the gate's taint was removed"
            assert keys.count("virtual-kubelet.io/provider") == 1
            return got["status"]["capacity"]["nvidia.com/gpu"], keys

        gpus, keys = check(await node(kube, cfg.name))
        assert gpus == full and "vkprovider.io/unavailable" not in keys

        _set_healthy(providers, False)

        async def breaker_open() -> bool:
            gpus, keys = check(await node(kube, cfg.name))
            return gpus == "0" and "vkprovider.io/unavailable" in keys

        await eventually(breaker_open, timeout=30)
        unavailable = next(
            t
            for t in (await node(kube, cfg.name))["spec"]["taints"]
            if t["key"] == "vkprovider.io/unavailable"
        )
        assert (unavailable["value"], unavailable["effect"]) == ("true", "NoSchedule")

        _set_healthy(providers, True)

        async def breaker_closed() -> bool:
            gpus, keys = check(await node(kube, cfg.name))
            return gpus == full and "vkprovider.io/unavailable" not in keys

        await eventually(breaker_closed, timeout=30)
        ready = condition(await node(kube, cfg.name), "Ready")
        assert ready is not None and ready["status"] == "True"
