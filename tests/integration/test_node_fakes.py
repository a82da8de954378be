"""Shared by the node integration tests (no tests here): a real in-process Provider whose probe
can be switched to fail."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tests.node_fakes import SwitchableProvider
from tests.support import edit_node_taints, eventually
from vkprovider.config import NodeConfig
from vkprovider.devcluster import Cluster
from vkprovider.kube import resources
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeNotFound
from vkprovider.node.agent import NodeAgent
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.service import Placer

# Helpers for the node integration tests ---------------------------------------------------------

CheckFn = Callable[[], Awaitable[bool]]


async def wait_for_probes(provider: SwitchableProvider, rounds: int = 2) -> None:
    """Until the agent has probed ``provider`` ``rounds`` more times (so it acted on the result)."""
    target = provider.probes + rounds

    async def done() -> bool:
        return provider.probes >= target

    await eventually(done, timeout=10, interval=0.05)


def node_config(name: str | None = None, **overrides: Any) -> NodeConfig:
    """Short intervals so a test sees many renewals/heartbeats (no timing is asserted)."""
    values: dict[str, Any] = {
        "name": name or f"vk-{uuid.uuid4().hex[:8]}",
        "lease_renew_seconds": 0.5,
        "status_update_seconds": 1.0,
        "probe_seconds": 0.3,
        "max_pods": 110,
    }
    values.update(overrides)
    return NodeConfig(**values)


@contextlib.asynccontextmanager
async def kube_client(cluster: Cluster) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.connect(str(cluster.kubeconfig), qps=200, burst=400)
    try:
        yield kube
    finally:
        await kube.close()


@contextlib.asynccontextmanager
async def running_agent(
    kube: KubeClient,
    cfg: NodeConfig,
    providers: dict[str, SwitchableProvider],
    placement: PlacementConfig | None = None,
    *,
    cleanup: bool = True,
) -> AsyncIterator[NodeAgent]:
    """Register and run a NodeAgent; stop it and (by default) delete its Node afterwards."""
    placer = Placer(providers, placement)
    agent = NodeAgent(kube, cfg, providers, placer, probe_timeout=1.0, retry_seconds=0.2)
    async with asyncio.timeout(30):
        await agent.register()
    task = asyncio.create_task(agent.run())
    try:
        yield agent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await task
        if cleanup:
            await delete_node(kube, cfg.name)


async def delete_node(kube: KubeClient, name: str) -> None:
    with contextlib.suppress(KubeNotFound):
        await kube.request("DELETE", f"/api/v1/nodes/{name}")
    with contextlib.suppress(KubeNotFound):
        await kube.request("DELETE", resources.lease_path("kube-node-lease", name))


async def node(kube: KubeClient, name: str) -> dict[str, Any]:
    found = await resources.get_node(kube, name)
    assert found is not None, f"node {name} not found"
    return found


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj["status"].get("conditions") or [] if c["type"] == kind), None)


def taint_keys(obj: dict[str, Any]) -> list[str]:
    return [t["key"] for t in obj["spec"].get("taints") or []]


async def add_foreign_taint(kube: KubeClient, name: str, taint: dict[str, Any]) -> None:
    """What the capacity gate does: read-modify-write of spec.taints guarded by resourceVersion."""
    await edit_node_taints(kube, name, lambda taints: [*taints, taint])
