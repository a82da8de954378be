"""The whole service in-process against the session cluster, over real fakecloud servers.

Several files run ``Service`` itself (not the parts ``sim.local.start_virtual_node`` wires): the
outage, capacity and status-CLI tests and the dashboard test, because what they check (the
ProvidersReachable condition, the breaker's taint and Events, the admin port) is the service's
own wiring. They share one lifecycle here, so a fix to its start-up wait or its clean-up (stop,
delete the node, stop the clouds) reaches all of them; each file may bring its own settings.
Tests that run several replicas themselves (leader election, several nodes) share ``shut_down``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.support import eventually
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.service import Service
from vkprovider.sim.local import fakecloud_module

JSON = dict[str, Any]
#: builds the service's settings from the cluster, the node's name and the started clouds
SettingsFor = Callable[[Cluster, str, dict[str, Any]], Settings]


@dataclass
class Running:
    """A running service: its node's name, its clouds (name -> FakeCloudServer) and a client."""

    service: Service
    task: asyncio.Task[None]
    node: str
    clouds: dict[str, Any]
    kube: KubeClient

    async def knobs(self, cloud: str, **knobs: Any) -> None:
        async with httpx.AsyncClient(base_url=self.clouds[cloud].url) as client:
            (await client.patch("/admin/knobs", json=knobs)).raise_for_status()

    async def deployments(self, cloud: str) -> dict[str, JSON]:
        async with httpx.AsyncClient(base_url=self.clouds[cloud].url) as client:
            resp = await client.get("/admin/deployments")
            resp.raise_for_status()
            return {d["uid"]: d for d in resp.json()}

    async def stats(self, cloud: str) -> dict[str, int]:
        async with httpx.AsyncClient(base_url=self.clouds[cloud].url) as client:
            resp = await client.get("/admin/stats")
            resp.raise_for_status()
            return dict(resp.json().get("requests", resp.json()))

    async def get_node(self) -> JSON:
        node: JSON = await self.kube.request("GET", f"/api/v1/nodes/{self.node}")
        return node

    async def pods(self, namespace: str) -> list[JSON]:
        body = await self.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        return list(body["items"])


def fast_settings(
    cluster: Cluster, node: str, clouds: dict[str, Any], *, blocklist_ttl_seconds: float = 5
) -> Settings:
    """Every loop at test speed: a provider outage is seen in seconds and the breaker opens in 2."""
    return Settings.model_validate(
        {
            "node": {
                "name": node,
                "lease_renew_seconds": 1,
                "status_update_seconds": 2,
                "probe_seconds": 0.5,
            },
            "kube": {"kubeconfig": str(cluster.kubeconfig)},
            "pods": {"status_poll_seconds": 0.5, "orphan_gc_seconds": 2, "drain_timeout_seconds": 2},
            "http": {"admin_port": 0},
            "providers": [
                {"name": name, "adapter": "fakecloud", "settings": {"url": cloud.url, "timeout_seconds": 2}}
                for name, cloud in clouds.items()
            ],
            "placement": {
                "offer_refresh_seconds": 1,
                "breaker_seconds": 2,
                "blocklist_ttl_seconds": blocklist_ttl_seconds,
            },
        }
    )


@contextlib.asynccontextmanager
async def running_service(
    cluster: Cluster,
    clouds: dict[str, Any],
    *,
    blocklist_ttl_seconds: float = 5,
    settings: SettingsFor | None = None,
    node: str | None = None,
) -> AsyncIterator[Running]:
    """Start a fakecloud server per config in ``clouds``, then ``Service`` on node ``node`` (a
    fresh name by default) with ``settings`` (default ``fast_settings``), and yield once its pod
    controller has synced. Afterwards: stop the service, delete its node, stop the clouds,
    whatever the test left."""
    servers = {}
    for name, config in clouds.items():
        servers[name] = fakecloud_module("server").FakeCloudServer(config)
        await servers[name].start()
    node = node or f"vk-{uuid.uuid4().hex[:8]}"
    if settings is None:
        built = fast_settings(cluster, node, servers, blocklist_ttl_seconds=blocklist_ttl_seconds)
    else:
        built = settings(cluster, node, servers)
    service = Service(built)
    task = asyncio.create_task(service.run())
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    try:

        async def synced() -> bool:
            assert not task.done(), task
            return service.controller is not None and service.controller.synced.is_set()

        await eventually(synced, timeout=60)
        yield Running(service, task, node, servers, kube)
    finally:
        await shut_down([service], [task], kube, [node])
        await kube.close()
        for server in servers.values():
            await server.stop()


async def shut_down(
    services: Iterable[Service],
    tasks: Iterable[asyncio.Task[None]],
    kube: KubeClient | None = None,
    nodes: Iterable[str] = (),
) -> None:
    """A test's clean-up: ask every service to stop, give each run task 30 s, then delete
    ``nodes``. Errors are swallowed: the test's own outcome is what it reports."""
    for service in services:
        service.stopping.set()
    for task in tasks:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(30):
                await task
    for node in nodes:
        assert kube is not None
        with contextlib.suppress(Exception):
            await kube.request("DELETE", f"/api/v1/nodes/{node}")


def phases(pods: list[JSON]) -> dict[str, str]:
    return {p["metadata"]["uid"]: p["status"].get("phase", "") for p in pods}


async def running_pods(svc: Running, namespace: str, count: int) -> dict[str, str]:
    """Wait until ``namespace`` has exactly ``count`` undeleted pods, all Running; uid -> phase."""

    async def ready() -> dict[str, str] | None:
        pods = [p for p in await svc.pods(namespace) if not p["metadata"].get("deletionTimestamp")]
        got = phases(pods)
        return got if len(got) == count and set(got.values()) == {"Running"} else None

    found: dict[str, str] = await eventually(ready, timeout=90)
    return found
