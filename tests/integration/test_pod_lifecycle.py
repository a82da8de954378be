"""The virtual node takes pods through their whole life on fakecloud, on a real control plane."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.build import Toolchain
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.sim.local import (
    VirtualNode,
    cloud_config,
    inference_deployment,
    start_virtual_node,
)

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(
        cluster, {"cheap": cloud_config("cheap", 1.0, capacity=8), "premium": cloud_config("premium", 3.0)}
    )
    yield node
    await node.stop()


async def pods_of(kube: KubeClient, namespace: str, app: str) -> list[JSON]:
    body = await kube.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": f"app={app}"}
    )
    return list(body["items"])


async def events_for(kube: KubeClient, namespace: str, name: str) -> list[JSON]:
    body = await kube.request(
        "GET",
        f"/api/v1/namespaces/{namespace}/events",
        query={"fieldSelector": f"involvedObject.name={name}"},
    )
    return list(body["items"])


async def events_with(kube: KubeClient, namespace: str, name: str, *reasons: str) -> list[JSON]:
    """The object's Events once every one of ``reasons`` is among them: Events are written in the
    background (they trail the status write they describe), so a test waits for them."""

    async def present() -> list[JSON] | None:
        events = await events_for(kube, namespace, name)
        return events if set(reasons) <= {e["reason"] for e in events} else None

    return list(await eventually(present))


def is_ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def cloud_deployments(node: VirtualNode, cloud: str) -> list[JSON]:
    async with httpx.AsyncClient(base_url=node.clouds[cloud].url) as client:
        resp = await client.get("/admin/deployments")
        resp.raise_for_status()
        return list(resp.json())


async def all_cloud_uids(node: VirtualNode) -> set[str]:
    uids: set[str] = set()
    for cloud in node.clouds:
        uids |= {d["uid"] for d in await cloud_deployments(node, cloud)}
    return uids


async def create_deployment(kube: KubeClient, namespace: str, manifest: JSON) -> None:
    await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=manifest)


async def deploy(node: VirtualNode, namespace: str, app: str, replicas: int) -> KubeClient:
    """Deployment ``app`` (the inference example) on the virtual node; the node's client."""
    kube = node.kube
    assert kube is not None
    await create_deployment(kube, namespace, inference_deployment(app, node.name, replicas=replicas))
    return kube


async def running_pod(kube: KubeClient, namespace: str, app: str, *, ready: bool = False) -> JSON:
    """Wait for a pod of ``app`` that is Running (with ``ready``: Ready) and return it."""

    async def found() -> JSON | None:
        pods = await pods_of(kube, namespace, app)
        pods = [p for p in pods if (is_ready(p) if ready else p["status"].get("phase") == "Running")]
        return pods[0] if pods else None

    pod: JSON = await eventually(found)
    return pod


async def fail_deployment(node: VirtualNode, uid: str, reason: str, message: str) -> None:
    """Fail pod ``uid``'s deployment in fakecloud ``cheap`` as a hardware fault would."""
    async with httpx.AsyncClient(base_url=node.clouds["cheap"].url) as client:
        resp = await client.post(
            f"/admin/deployments/{uid}/fail", json={"reason": reason, "message": message}
        )
        resp.raise_for_status()


async def test_deployment_runs_on_cheapest_fakecloud_and_becomes_ready(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = await deploy(vnode, namespace, "infer", replicas=4)

    async def four_ready() -> list[JSON] | None:
        pods = await pods_of(kube, namespace, "infer")
        ready = [p for p in pods if p["status"].get("phase") == "Running" and is_ready(p)]
        return ready if len(ready) == 4 else None

    ready = await eventually(four_ready)
    for pod in ready:
        annotations = pod["metadata"]["annotations"]
        assert annotations["vkprovider.io/provider"] == "cheap"  # 1.0/h beats 3.0/h
        assert pod["spec"]["nodeName"] == vnode.name
        status = pod["status"]
        assert status["hostIP"] == "127.0.0.1"
        # No podIP: fakecloud's addresses are published as Service endpoints by vkprovider
        # itself (test_service_endpoints.py); the route is on the pod instead.
        assert not status.get("podIP")
        assert json.loads(annotations["vkprovider.io/endpoints"])["addresses"]
        assert status["startTime"]
        assert [c["type"] for c in status["conditions"]] == [
            "PodScheduled",
            "Initialized",
            "ContainersReady",
            "Ready",
            "vkprovider.io/ServiceRoute",
        ]
        (container,) = status["containerStatuses"]
        assert container["ready"] and "running" in container["state"]
        placement = json.loads(annotations["vkprovider.io/placement"])
        assert "cheap" in json.dumps(placement)

    uids = {p["metadata"]["uid"] for p in ready}
    assert uids == {d["uid"] for d in await cloud_deployments(vnode, "cheap")}
    events = await events_with(kube, namespace, ready[0]["metadata"]["name"], "ProviderCreateSuccess")
    created = [e for e in events if e["reason"] == "ProviderCreateSuccess"]
    assert created and "cheap" in created[0]["message"]


async def test_deleting_the_deployment_leaves_nothing_in_fakecloud(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = await deploy(vnode, namespace, "gone", replicas=3)

    async def three_running() -> bool:
        pods = await pods_of(kube, namespace, "gone")
        return sum(p["status"].get("phase") == "Running" for p in pods) == 3

    await eventually(three_running)
    assert len(await all_cloud_uids(vnode)) == 3
    await kube.request(
        "DELETE",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/gone",
        body={"propagationPolicy": "Foreground"},
    )

    async def all_gone() -> bool:
        return not await pods_of(kube, namespace, "gone") and not await all_cloud_uids(vnode)

    await eventually(all_gone)


async def test_provider_failure_fails_the_pod_and_a_replacement_runs(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = await deploy(vnode, namespace, "flaky", replicas=1)

    victim = await running_pod(kube, namespace, "flaky")
    uid = victim["metadata"]["uid"]
    await fail_deployment(vnode, uid, "GPUFault", "Xid 79: GPU fell off the bus")

    async def failed_and_replaced() -> bool:
        pods = await pods_of(kube, namespace, "flaky")
        failed = [p for p in pods if p["metadata"]["uid"] == uid and p["status"].get("phase") == "Failed"]
        running = [p for p in pods if p["metadata"]["uid"] != uid and p["status"].get("phase") == "Running"]
        return bool(failed) and bool(running)

    await eventually(failed_and_replaced)
    pods = await pods_of(kube, namespace, "flaky")
    (failed,) = [p for p in pods if p["metadata"]["uid"] == uid]
    assert failed["status"]["reason"] == "GPUFault"
    assert "Xid 79" in failed["status"]["message"]
    await events_with(kube, namespace, failed["metadata"]["name"], "GPUFault")


async def test_force_delete_removes_the_external_deployment(vnode: VirtualNode, namespace: str) -> None:
    kube = await deploy(vnode, namespace, "forced", replicas=1)

    pod = await running_pod(kube, namespace, "forced")
    uid = pod["metadata"]["uid"]
    assert uid in await all_cloud_uids(vnode)
    await kube.request(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
        body={"gracePeriodSeconds": 0},
    )

    async def deployment_gone() -> bool:
        return uid not in await all_cloud_uids(vnode)

    await eventually(deployment_gone)


async def test_status_is_pushed_by_a_provider_that_can_watch(cluster: Cluster, namespace: str) -> None:
    # Poll only once an hour: Ready can then only arrive through fakecloud's watch stream.
    node = await start_virtual_node(cluster, {"pushy": cloud_config("pushy", 1.0)}, status_poll_seconds=3600)
    try:
        kube = node.kube
        assert kube is not None and node.controller is not None
        await create_deployment(kube, namespace, inference_deployment("pushed", node.name, replicas=1))

        async def ready() -> bool:
            return any(is_ready(p) for p in await pods_of(kube, namespace, "pushed"))

        await eventually(ready)
        assert node.controller.tracker.polls == 1  # the initial sync only
        assert node.controller.tracker.pushed > 0
    finally:
        await node.stop()


async def test_graceful_delete_shows_terminated_states_while_a_finalizer_keeps_the_pod(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = await deploy(vnode, namespace, "drain", replicas=1)

    pod = await running_pod(kube, namespace, "drain")
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    # Someone who reads the outcome (as a Job's controller does) keeps the object after the delete.
    await kube.request(
        "PATCH", path, body={"metadata": {"finalizers": ["example.com/keep"]}}, content_type=MERGE_PATCH
    )
    seen: list[JSON] = []

    async def watch() -> None:
        query = {
            "fieldSelector": f"metadata.name={name}",
            "resourceVersion": pod["metadata"]["resourceVersion"],
        }
        async for event in kube.stream(f"/api/v1/namespaces/{namespace}/pods", query=query, timeout=90):
            seen.append(event)
            if event["type"] == "DELETED":
                return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # the watch is open before the delete
    # Scale to zero: the ReplicaSet deletes the pod gracefully (default 30 s grace).
    await kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/drain",
        body={"spec": {"replicas": 0}},
        content_type=MERGE_PATCH,
    )

    async def ended() -> JSON | None:
        held = await kube.request("GET", path)
        done = held["metadata"].get("deletionTimestamp") and held["status"].get("phase") == "Failed"
        return held if done else None

    held = await eventually(ended)
    (container,) = held["status"]["containerStatuses"]
    # The server was stopped, not finished: no exit code was reported, so it is no success
    # (issue 22): Failed, 137, ContainerStatusUnknown, as the kubelet writes it.
    terminated = container["state"]["terminated"]  # what the keeper reads
    assert terminated["exitCode"] == 137 and terminated["reason"] == "ContainerStatusUnknown"
    assert uid not in await all_cloud_uids(vnode)
    await kube.request("PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    await asyncio.wait_for(watcher, timeout=90)
    terminal = [e for e in seen if e["object"]["status"].get("phase") in ("Succeeded", "Failed")]
    phases = [e["object"]["status"]["phase"] for e in terminal]
    assert phases and set(phases) == {"Failed"}  # one outcome, never rewritten
    await events_with(kube, namespace, name, "ProviderDeleteSuccess")


def reachability(pod: JSON) -> JSON | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "vkprovider.io/ProviderReachable"), None)


async def test_provider_api_outage_keeps_pods_and_marks_them_unreachable(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = await deploy(vnode, namespace, "steady", replicas=1)

    pod = await running_pod(kube, namespace, "steady", ready=True)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    store = vnode.clouds["cheap"].store
    creates = store.requests.get("POST /v1/deployments", 0)
    rules = []
    async with httpx.AsyncClient(base_url=vnode.clouds["cheap"].url) as client:
        for path in ("/v1/deployments", "/v1/deployments/{uid}", "/v1/health", "/v1/offers"):
            resp = await client.post("/admin/rules", json={"path": path, "status": 503})
            resp.raise_for_status()
            rules.append(resp.json()["id"])

        async def marked() -> JSON | None:
            current = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
            cond = reachability(current)
            return current if cond and cond["status"] == "False" else None

        during = await eventually(marked, timeout=120)
        assert during["status"]["phase"] == "Running" and is_ready(during)  # last observed status kept
        assert "cheap" in (reachability(during) or {})["message"]
        unreachable = [
            e
            for e in await events_with(kube, namespace, name, "ProviderUnreachable")
            if e["reason"] == "ProviderUnreachable"
        ]
        assert len(unreachable) == 1 and unreachable[0]["type"] == "Warning"
        for rule in rules:
            (await client.delete(f"/admin/rules/{rule}")).raise_for_status()

    async def recovered() -> JSON | None:
        current = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        cond = reachability(current)
        return current if cond and cond["status"] == "True" else None

    after = await eventually(recovered, timeout=120)
    assert after["status"]["phase"] == "Running" and after["metadata"]["uid"] == uid
    reasons = {e["reason"] for e in await events_for(kube, namespace, name)}
    assert "ProviderLost" not in reasons
    assert uid in await all_cloud_uids(vnode)
    assert store.requests.get("POST /v1/deployments", 0) == creates  # nothing redeployed


async def kubectl_statuses(cluster: Cluster, namespace: str) -> dict[str, str]:
    """``kubectl get pods`` as an operator sees it: name -> STATUS column."""
    kubectl = Toolchain.default().binary("kubectl")
    proc = await asyncio.create_subprocess_exec(
        str(kubectl),
        "--kubeconfig",
        str(cluster.kubeconfig),
        "get",
        "pods",
        "-n",
        namespace,
        "--no-headers",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    rows = [line.split() for line in out.decode().splitlines() if line.strip()]
    return {row[0]: row[2] for row in rows}


async def test_kubectl_status_column_names_why_a_pod_waits_or_failed(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    # Nobody sells B200s: placement keeps the pod Pending with NoCandidates.
    huge = inference_deployment("huge", vnode.name, replicas=1)
    huge["spec"]["template"]["metadata"]["annotations"] = {"vkprovider.io/gpu-type": "B200"}
    await create_deployment(kube, namespace, huge)
    await create_deployment(kube, namespace, inference_deployment("gpufault", vnode.name, replicas=1))

    async def pending_shown() -> bool:
        shown = await kubectl_statuses(vnode.cluster, namespace)
        return any(name.startswith("huge-") and status == "NoCandidates" for name, status in shown.items())

    await eventually(pending_shown)

    victim = await running_pod(kube, namespace, "gpufault")
    name, uid = victim["metadata"]["name"], victim["metadata"]["uid"]
    await fail_deployment(vnode, uid, "GPUFault", "Xid 79")

    async def failed_shown() -> bool:
        return (await kubectl_statuses(vnode.cluster, namespace)).get(name) == "GPUFault"

    await eventually(failed_shown)
    pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    (container,) = pod["status"]["containerStatuses"]
    assert pod["status"]["phase"] == "Failed" and "terminated" in container["state"]
