"""Two replicas of the service with leader election: only the leader acts; the other takes over."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support import eventually
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.service import Service
from vkprovider.sim.local import cloud_config, fakecloud_module

pytestmark = pytest.mark.cluster


@pytest.fixture
async def cloud() -> AsyncIterator[Any]:
    server = fakecloud_module("server").FakeCloudServer(cloud_config("shared", 1.0))
    await server.start()
    yield server
    await server.stop()


def replica_settings(cluster: Cluster, node: str, cloud_url: str, identity: str) -> Settings:
    return Settings(
        node={"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 1},
        kube={"kubeconfig": str(cluster.kubeconfig)},
        pods={"status_poll_seconds": 0.5, "drain_timeout_seconds": 2},
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
        pod = {
            "metadata": {"name": "one"},
            "spec": {
                "nodeName": node,
                "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
                "containers": [
                    {"name": "c", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
        }
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)

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
        for service in replicas.values():
            service.stopping.set()
        for task in tasks.values():
            with contextlib.suppress(Exception):
                async with asyncio.timeout(30):
                    await task
        await kube.close()
