"""Two replicas of the service with leader election: only the leader acts; the other takes over."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.service_support import shut_down
from tests.support import bound_gpu_pod, eventually
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster
from vkprovider.kube import resources
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeConflict
from vkprovider.service import Service
from vkprovider.sim.local import cloud_config, fakecloud_module

pytestmark = pytest.mark.cluster


@pytest.fixture
async def cloud() -> AsyncIterator[Any]:
    server = fakecloud_module("server").FakeCloudServer(cloud_config("shared", 1.0))
    await server.start()
    yield server
    await server.stop()


def replica_settings(
    cluster: Cluster, node: str, cloud_url: str, identity: str, *, orphan_gc_seconds: float = 60.0
) -> Settings:
    return Settings(
        node={"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 1},
        kube={"kubeconfig": str(cluster.kubeconfig)},
        pods={
            "status_poll_seconds": 0.5,
            "drain_timeout_seconds": 2,
            "orphan_gc_seconds": orphan_gc_seconds,
        },
        http={"admin_port": 0},
        providers=[{"name": "shared", "adapter": "fakecloud", "settings": {"url": cloud_url}}],
        leader_election={
            "enabled": True,
            "namespace": "default",
            "lease_name": f"lead-{node}",
            "identity": identity,
        },
    )


async def test_only_the_leader_acts_and_the_standby_takes_over(
    cluster: Cluster, namespace: str, cloud: Any
) -> None:
    node = f"vk-{uuid.uuid4().hex[:8]}"
    replicas = {name: Service(replica_settings(cluster, node, cloud.url, name)) for name in ("a", "b")}
    tasks = {name: asyncio.create_task(service.run()) for name, service in replicas.items()}
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    try:

        async def one_leader() -> str | None:
            synced = [n for n, s in replicas.items() if s.controller and s.controller.synced.is_set()]
            return synced[0] if len(synced) == 1 else None

        leader = await eventually(one_leader, timeout=60)
        standby = "b" if leader == "a" else "a"
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=bound_gpu_pod("one", node))

        async def running() -> bool:
            current = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/one")
            return bool(current["status"].get("phase") == "Running")

        await eventually(running)
        standby_controller = replicas[standby].controller
        assert standby_controller is None or not standby_controller.synced.is_set()
        assert cloud.store.requests.get("POST /v1/deployments", 0) == 1

        replicas[leader].stopping.set()  # the leader shuts down and releases the lease
        async with asyncio.timeout(30):
            await tasks[leader]

        async def taken_over() -> bool:
            controller = replicas[standby].controller
            return controller is not None and controller.synced.is_set()

        await eventually(taken_over, timeout=60)
        assert cloud.store.requests.get("POST /v1/deployments", 0) == 1  # adopted, not redeployed
        assert (await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/one"))["status"][
            "phase"
        ] == "Running"
    finally:
        await shut_down(replicas.values(), tasks.values())
        await kube.close()


async def readyz(service: Service) -> tuple[int, dict[str, Any]]:
    assert service.admin is not None
    async with httpx.AsyncClient(base_url=service.admin.url, timeout=5) as http:
        response = await http.get("/readyz")
    return response.status_code, response.json()


async def hand_lease_to(kube: KubeClient, node: str, identity: str) -> None:
    """Move leadership as a lease takeover does: the old holder sees another holder and steps down."""

    async def replaced() -> bool:
        lease = await resources.get_lease(kube, "default", f"lead-{node}")
        assert lease is not None
        lease["spec"]["holderIdentity"] = identity
        try:
            await resources.replace_lease(kube, lease)
        except KubeConflict:
            return False  # the holder renewed in between: read again
        return True

    await eventually(replaced, timeout=30, interval=0.05)


async def test_regaining_leadership_starts_from_a_fresh_list_and_deletes_nothing_live(
    cluster: Cluster, namespace: str, cloud: Any
) -> None:
    """A leads (empty node), B takes over and places a pod, A leads again: A's new term must
    list again, keep B's deployment, and report ready only once synced in that term."""
    node = f"vk-{uuid.uuid4().hex[:8]}"
    a = Service(replica_settings(cluster, node, cloud.url, "a", orphan_gc_seconds=0.5))
    b = Service(replica_settings(cluster, node, cloud.url, "b", orphan_gc_seconds=0.5))
    tasks = {"a": asyncio.create_task(a.run())}
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    try:

        async def synced(service: Service) -> bool:
            return service.controller is not None and service.controller.synced.is_set()

        await eventually(lambda: synced(a), timeout=60)
        assert a.controller is not None
        status, body = await readyz(a)
        assert status == 200 and body["role"] == "leader" and body["synced"]

        async def a_has_gc_passes() -> bool:
            return a.controller is not None and a.controller.orphan_passes > 0

        await eventually(a_has_gc_passes, timeout=30)  # A's caches: a node with no pods
        tasks["b"] = asyncio.create_task(b.run())
        await eventually(lambda: readyz_role(b, "standby"), timeout=60)

        await hand_lease_to(kube, node, "b")
        await eventually(lambda: synced(b), timeout=60)
        await eventually(lambda: readyz_role(a, "standby"), timeout=60)
        assert not a.controller.synced.is_set()  # not ready from a stale term

        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=bound_gpu_pod("late", node))

        async def running() -> str | None:
            pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/late")
            ok = pod["status"].get("phase") == "Running"
            return str(pod["metadata"]["uid"]) if ok else None

        uid = await eventually(running, timeout=60)
        assert uid in cloud.store.deployments  # placed by B while A was standing by

        terms, passes = a.controller.terms, a.controller.orphan_passes
        await hand_lease_to(kube, node, "a")

        async def a_collected_in_its_new_term() -> bool:
            assert a.controller is not None
            return (
                a.controller.terms > terms
                and a.controller.synced.is_set()
                and a.controller.orphan_passes >= passes + 2
            )

        await eventually(a_collected_in_its_new_term, timeout=60)
        status, body = await readyz(a)
        assert status == 200 and body["role"] == "leader" and body["term"] == a.controller.terms
        assert uid in cloud.store.deployments  # B's pod survived A's orphan passes
        assert a.controller.orphans_deleted == 0
        assert a.controller.informer.get(f"{namespace}/late") is not None  # A listed it afresh
        pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/late")
        assert pod["status"]["phase"] == "Running"
        assert cloud.store.requests.get("POST /v1/deployments", 0) == 1
    finally:
        await shut_down((a, b), tasks.values())
        await kube.close()


async def readyz_role(service: Service, role: str) -> bool:
    if service.admin is None or service.admin.port == 0:
        return False
    try:
        status, body = await readyz(service)
    except httpx.HTTPError:
        return False
    return status == 200 and body.get("role") == role
