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


async def node_events(kube: Any, name: str) -> list[dict[str, Any]]:
    body = await kube.request(
        "GET",
        "/api/v1/namespaces/default/events",
        query={"fieldSelector": f"involvedObject.kind=Node,involvedObject.name={name}"},
    )
    return list(body["items"])


async def test_every_provider_down_keeps_the_node_ready_and_its_lease_renewed(cluster: Cluster) -> None:
    """The Lease means "vkprovider is alive": a provider API outage longer than the
    node-monitor grace period (10 s in the test cluster) never makes the real node-lifecycle
    controller mark the node unreachable; reachability is a condition and Events of its own."""
    cfg = node_config()
    providers = _providers()
    async with kube_client(cluster) as kube, running_agent(kube, cfg, providers) as agent:
        providers["a"].healthy = False

        async def one_down() -> bool:
            cond = condition(await node(kube, cfg.name), "ProvidersReachable")
            return cond is not None and cond["reason"] == "ProviderUnreachable"

        await eventually(one_down, timeout=20)
        cond = condition(await node(kube, cfg.name), "ProvidersReachable")
        assert cond is not None and cond["status"] == "False"
        assert cond["message"].startswith("unreachable: a (") and "reachable: b" in cond["message"]

        _set_healthy(providers, False)

        async def all_down() -> bool:
            cond = condition(await node(kube, cfg.name), "ProvidersReachable")
            return cond is not None and cond["reason"] == "ProvidersUnreachable"

        await eventually(all_down, timeout=20)
        lease = await resources.get_lease(kube, "kube-node-lease", cfg.name)
        assert lease is not None
        renewals = agent.lease.renewals

        # Longer than node-monitor-grace-period: the controller would have acted by now.
        async def grace_passed() -> bool:
            return agent.lease.renewals >= renewals + 30  # 0.5 s apart: about 15 s

        await eventually(grace_passed, timeout=60)
        got = await node(kube, cfg.name)
        ready = condition(got, "Ready")
        assert ready is not None and ready["status"] == "True", ready
        assert "node.kubernetes.io/unreachable" not in taint_keys(got)
        assert "node.kubernetes.io/not-ready" not in taint_keys(got)
        later = await resources.get_lease(kube, "kube-node-lease", cfg.name)
        assert later is not None and later["spec"]["renewTime"] > lease["spec"]["renewTime"]

        _set_healthy(providers, True)

        async def reachable_again() -> bool:
            cond = condition(await node(kube, cfg.name), "ProvidersReachable")
            return cond is not None and cond["status"] == "True"

        await eventually(reachable_again, timeout=20)

        async def events_recorded() -> list[tuple[str, str, str]] | None:
            found = sorted(
                (e["type"], e["reason"], e["message"].split(" ")[1])
                for e in await node_events(kube, cfg.name)
                if e.get("reportingComponent") == "vkprovider"
            )
            return found if len(found) >= 4 else None

        found = await eventually(events_recorded, timeout=20)
        assert found == [
            ("Normal", "ProviderReachable", "a"),
            ("Normal", "ProviderReachable", "b"),
            ("Warning", "ProviderUnreachable", "a"),
            ("Warning", "ProviderUnreachable", "b"),
        ]


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
