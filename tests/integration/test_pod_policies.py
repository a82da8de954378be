"""restartPolicy for finished deployments, periodic orphan GC, and spec updates to running pods."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.test_pod_lifecycle import all_cloud_uids, events_for
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(cluster, {"cheap": cloud_config("cheap", 1.0, capacity=20)})
    yield node
    await node.stop()


def bare_pod(
    name: str, node: str, *, restart: str, run_seconds: float | None = None, exit_code: int = 0
) -> JSON:
    env = []
    if run_seconds is not None:
        env = [
            {"name": "FAKECLOUD_RUN_SECONDS", "value": str(run_seconds)},
            {"name": "FAKECLOUD_EXIT_CODE", "value": str(exit_code)},
        ]
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "containers": [
                {
                    "name": "job",
                    "image": "img:1",
                    "env": env,
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


async def create(kube: KubeClient, namespace: str, pod: JSON) -> JSON:
    created: JSON = await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    return created


async def read(kube: KubeClient, namespace: str, name: str) -> JSON:
    pod: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return pod


@pytest.mark.parametrize(
    ("restart", "exit_code", "phase"),
    [("Never", 0, "Succeeded"), ("Never", 3, "Failed"), ("OnFailure", 0, "Succeeded")],
)
async def test_finished_run_honours_restart_policy(
    vnode: VirtualNode, namespace: str, restart: str, exit_code: int, phase: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    created = await create(
        kube, namespace, bare_pod("job", vnode.name, restart=restart, run_seconds=1, exit_code=exit_code)
    )

    async def finished() -> JSON | None:
        pod = await read(kube, namespace, "job")
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    pod = await eventually(finished)
    assert pod["status"]["phase"] == phase
    (container,) = pod["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == exit_code
    uid = created["metadata"]["uid"]

    async def cleaned() -> bool:
        return uid not in await all_cloud_uids(vnode)  # a finished pod's deployment stops billing

    await eventually(cleaned)
    assert (await read(kube, namespace, "job"))["status"]["phase"] == phase  # never touched again


async def test_restart_always_restarts_an_exited_container(vnode: VirtualNode, namespace: str) -> None:
    kube = vnode.kube
    assert kube is not None
    await create(
        kube, namespace, bare_pod("daemon", vnode.name, restart="Always", run_seconds=1, exit_code=0)
    )

    async def restarted() -> JSON | None:
        pod = await read(kube, namespace, "daemon")
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and statuses[0]["restartCount"] >= 1 else None

    pod = await eventually(restarted)
    assert pod["status"]["phase"] == "Running"

    async def restart_event() -> bool:  # recorded right after the status write
        return "Restarting" in {e["reason"] for e in await events_for(kube, namespace, "daemon")}

    await eventually(restart_event)
    # The restart is real: the provider got a second create for the pod and runs it again,
    # not only the status the service wrote itself.
    store = vnode.clouds["cheap"].store
    uid = pod["metadata"]["uid"]

    async def redeployed() -> bool:  # the billing ledger keeps every deployment ever accepted
        deployments = {entry.deployment_id for entry in store.ledger.values() if entry.uid == uid}
        return store.requests.get("POST /v1/deployments", 0) >= 2 and len(deployments) >= 2

    await eventually(redeployed)


async def test_orphaned_deployment_is_deleted_while_running(vnode: VirtualNode) -> None:
    cloud = vnode.clouds["cheap"]
    orphan = {
        "uid": "orphan-uid-1",
        "namespace": "gone",
        "name": "gone",
        "node_name": vnode.name,
        "containers": [{"name": "c", "image": "img:1"}],
        "gpu_count": 1,
    }
    labels = {"vkprovider.io/pod-uid": "orphan-uid-1", "vkprovider.io/node-name": vnode.name}
    async with httpx.AsyncClient(base_url=cloud.url) as client:
        resp = await client.post("/v1/deployments", json={"request": orphan, "labels": labels})
        assert resp.status_code in (200, 201), resp.text
    assert "orphan-uid-1" in await all_cloud_uids(vnode)

    async def collected() -> bool:
        return "orphan-uid-1" not in await all_cloud_uids(vnode)

    await eventually(collected, timeout=30)


async def test_image_change_on_a_provider_without_in_place_update_is_reported(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    created = await create(kube, namespace, bare_pod("web", vnode.name, restart="Always"))

    async def running() -> bool:
        return (await read(kube, namespace, "web"))["status"].get("phase") == "Running"

    await eventually(running)
    creates = vnode.clouds["cheap"].store.requests.get("POST /v1/deployments", 0)
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/web",
        body={"spec": {"containers": [{"name": "job", "image": "img:2"}]}},
        content_type="application/strategic-merge-patch+json",
    )

    async def reported() -> list[JSON] | None:
        events = [
            e for e in await events_for(kube, namespace, "web") if e["reason"] == "ProviderUpdateFailed"
        ]
        return events or None

    (event,) = await eventually(reported)
    assert event["type"] == "Warning" and "job=img:1" in event["message"]
    pod = await read(kube, namespace, "web")
    assert pod["status"]["phase"] == "Running"
    assert created["metadata"]["uid"] in await all_cloud_uids(vnode)
    assert vnode.clouds["cheap"].store.requests.get("POST /v1/deployments", 0) == creates
