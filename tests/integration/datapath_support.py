"""The data path's test bench, shared by the files that send real requests through a Service: a
control plane started with its data path (kube-proxy in nftables mode in a node namespace,
listeners at the local kwok pods' IPs, fakecloud serving its deployments), a virtual node with a
routed and a dark provider, and the manifests and waits the tests share.

A test file uses the fixtures by binding them at module level (``dp_cluster = datapath_support.
dp_cluster``), so each file gets its own cluster, as with any module-scoped fixture."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from vkprovider.devcluster import Cluster
from vkprovider.devcluster.datapath import provider_range, why_unavailable
from vkprovider.devcluster.kwok import GPU_POOL_SELECTOR
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, inference_deployment, start_virtual_node

JSON = dict[str, Any]
ROUTED, DARK = provider_range(0), provider_range(1)


@pytest.fixture(scope="module")
async def dp_cluster() -> AsyncIterator[Cluster]:
    reason = why_unavailable()
    if reason:
        pytest.skip(f"no data path on this machine: {reason}")
    # pod_delays: kwok's own stage set, so pods that serve through their grace are deleted at its end
    started = await Cluster.start(f"dp-{os.getpid()}", gpu_nodes=2, datapath=True, pod_delays=True)
    try:
        yield started
    finally:
        await started.stop(remove=True)


@pytest.fixture
async def vnode(dp_cluster: Cluster) -> AsyncIterator[VirtualNode]:
    assert dp_cluster.datapath is not None
    backends = dp_cluster.datapath.backends
    routed = cloud_config("routed", 1.0).model_copy(update={"ip_range": ROUTED, "serve_netns": backends})
    dark = cloud_config("dark", 1.0).model_copy(update={"ip_range": DARK, "serve_netns": backends})
    dark = dark.model_copy(update={"knobs": dark.knobs.model_copy(update={"routable": False})})
    dp_cluster.datapath.route(ROUTED)  # the cluster's network reaches "routed", not "dark"
    node = await start_virtual_node(dp_cluster, {"routed": routed, "dark": dark})
    yield node
    await node.stop()
    dp_cluster.datapath.unroute(ROUTED)


@pytest.fixture
async def ns(vnode: VirtualNode) -> AsyncIterator[str]:
    assert vnode.kube is not None
    name = f"dp-{uuid.uuid4().hex[:8]}"
    await vnode.kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    yield name
    await vnode.kube.request("DELETE", f"/api/v1/namespaces/{name}")


def external(name: str, node: str, replicas: int, provider: str, *, grace: int = 5) -> JSON:
    manifest = inference_deployment(name, node, replicas, grace_seconds=grace)
    template = manifest["spec"]["template"]
    template["metadata"]["labels"]["app"] = "infer"
    template["metadata"]["annotations"] = {"vkprovider.io/providers": provider}
    template["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    manifest["spec"]["selector"]["matchLabels"] = {"app": "infer", "side": name}
    template["metadata"]["labels"]["side"] = name
    return manifest


def local(name: str, replicas: int, *, grace: int = 5) -> JSON:
    manifest = external(name, "unused", replicas, "none", grace=grace)
    spec = manifest["spec"]["template"]["spec"]
    spec["nodeSelector"] = dict([GPU_POOL_SELECTOR.split("=")])
    del manifest["spec"]["template"]["metadata"]["annotations"]
    return manifest


async def ready_pods(kube: KubeClient, ns: str, side: str, count: int) -> list[JSON] | None:
    pods = (
        await kube.request("GET", f"/api/v1/namespaces/{ns}/pods", query={"labelSelector": f"side={side}"})
    )["items"]
    ready = [
        p
        for p in pods
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    ]
    return ready if len(ready) == count else None


async def setup(kube: KubeClient, ns: str, *deployments: JSON) -> str:
    """Create the deployments and a Service over ``app=infer`` (port 80 → named port http)."""
    for manifest in deployments:
        await kube.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=manifest)
    service = {
        "metadata": {"name": "infer"},
        "spec": {"selector": {"app": "infer"}, "ports": [{"port": 80, "targetPort": "http"}]},
    }
    created = await kube.request("POST", f"/api/v1/namespaces/{ns}/services", body=service)
    return str(created["spec"]["clusterIP"])


async def served(vnode: VirtualNode, cloud: str) -> bool:
    """fakecloud holds a listener for each of the cloud's deployments."""
    server = vnode.clouds[cloud]
    ips = {d.ip for d in server.store.deployments.values()}
    return bool(ips) and server.replicas is not None and ips <= {ip for ip, _ in server.replicas.servers}
