"""Real requests through a Service: a control plane started with its data path (kube-proxy in
nftables mode in a node namespace, listeners at the local kwok pods' IPs, fakecloud serving its
deployments at the addresses it reports), vkprovider publishing the external replicas, and the
bounded load generator sending to the ClusterIP from the node namespace. Nothing stands in for
kube-proxy: a request reaches a replica only through the rules it wrote."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.datapath import POD_CIDR, SERVICE_CIDR, provider_range, why_unavailable
from vkprovider.devcluster.kwok import GPU_POOL_SELECTOR
from vkprovider.devcluster.loadgen import LoadReport, run_load
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import get
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, inference_deployment, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
ROUTED, DARK = provider_range(0), provider_range(1)


@pytest.fixture(scope="module")
async def dp_cluster() -> AsyncIterator[Cluster]:
    reason = why_unavailable()
    if reason:
        pytest.skip(f"no data path on this machine: {reason}")
    started = await Cluster.start(f"dp-{os.getpid()}", gpu_nodes=2, datapath=True)
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


def external(name: str, node: str, replicas: int, provider: str) -> JSON:
    manifest = inference_deployment(name, node, replicas)
    template = manifest["spec"]["template"]
    template["metadata"]["labels"]["app"] = "infer"
    template["metadata"]["annotations"] = {"vkprovider.io/providers": provider}
    template["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    manifest["spec"]["selector"]["matchLabels"] = {"app": "infer", "side": name}
    template["metadata"]["labels"]["side"] = name
    return manifest


def local(name: str, replicas: int) -> JSON:
    manifest = external(name, "unused", replicas, "none")
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


async def test_a_service_over_local_and_external_replicas_answers_from_all_four(
    dp_cluster: Cluster, vnode: VirtualNode, ns: str
) -> None:
    kube, path = vnode.kube, dp_cluster.datapath
    assert kube is not None and path is not None
    cluster_ip = await setup(kube, ns, local("home", 2), external("away", vnode.name, 2, "routed"))
    assert ipaddress.IPv4Address(cluster_ip) in ipaddress.IPv4Network(SERVICE_CIDR)
    home = await eventually(lambda: ready_pods(kube, ns, "home", 2))
    away = await eventually(lambda: ready_pods(kube, ns, "away", 2))
    assert all(ipaddress.IPv4Address(p["status"]["podIP"]) in ipaddress.IPv4Network(POD_CIDR) for p in home)
    assert all(not p["status"].get("podIP") for p in away)  # published by vkprovider instead

    async def all_four() -> LoadReport | None:
        report = await run_load(path.node, cluster_ip, 80, rate=20, duration=2)
        return report if len(report.answered_by) == 4 else None

    await eventually(all_four, timeout=90)
    # Every endpoint is in kube-proxy's rules now: a steady load sees no failure and all four.
    report = await run_load(path.node, cluster_ip, 80, rate=50, duration=4)
    deployments = {d.provider_id for d in vnode.clouds["routed"].store.deployments.values()}
    assert report.requests == 200 and report.failed == 0, report.to_json()
    assert set(report.answered_by) == {f"local/{p['metadata']['name']}" for p in home} | {
        f"routed/{d}" for d in deployments
    }
    assert report.by_where().keys() == {"local", "routed"}
    # The ClusterIP exists only in kube-proxy's nftables rules in the node namespace.
    nft = ["ip", "netns", "exec", path.node, "nft", "list", "table", "ip", "kube-proxy"]
    rules = (await asyncio.to_thread(subprocess.run, nft, capture_output=True, text=True, check=True)).stdout
    assert cluster_ip in rules

    # A local replica that goes away stops answering at its IP (refused, as on a real node).
    await kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/deployments/home/scale",
        body={"spec": {"replicas": 1}},
        content_type="application/merge-patch+json",
    )
    left = await eventually(lambda: ready_pods(kube, ns, "home", 1))
    gone = next(p for p in home if p["metadata"]["name"] != left[0]["metadata"]["name"])
    node = NetnsSockets(path.node)
    try:

        async def refused() -> bool:
            try:
                await get(await node.client(), gone["status"]["podIP"], 8000)
            except ConnectionRefusedError:
                return True
            return False

        await eventually(refused)
        assert (await get(await node.client(), left[0]["status"]["podIP"], 8000))["pod"] == left[0][
            "metadata"
        ]["name"]
    finally:
        node.close()


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("watch", "endpointslices", True),
        ("list", "services", True),
        ("create", "events", True),
        ("get", "secrets", False),
        ("create", "pods", False),
        ("update", "endpointslices", False),
    ],
)
async def test_kube_proxy_runs_as_its_own_user_with_the_node_proxier_role_only(
    dp_cluster: Cluster, verb: str, resource: str, allowed: bool
) -> None:
    group = {"endpointslices": "discovery.k8s.io", "events": "events.k8s.io"}.get(resource, "")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:kube-proxy",
            "resourceAttributes": {"verb": verb, "resource": resource, "group": group},
        },
    }
    async with dp_cluster.http() as http:
        answer = await http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"].get("allowed", False) is allowed
    kubeconfig = (dp_cluster.workdir / "datapath" / "kube-proxy.kubeconfig").read_text()
    assert "system:kube-proxy" in kubeconfig and str(dp_cluster.admin.cert) not in kubeconfig


async def test_a_provider_without_a_route_is_not_published_and_no_request_fails(
    dp_cluster: Cluster, vnode: VirtualNode, ns: str
) -> None:
    kube, path = vnode.kube, dp_cluster.datapath
    assert kube is not None and path is not None
    assert DARK not in path.routes()
    cluster_ip = await setup(kube, ns, local("home", 1), external("dark", vnode.name, 1, "dark"))
    home = await eventually(lambda: ready_pods(kube, ns, "home", 1))
    dark = await eventually(lambda: ready_pods(kube, ns, "dark", 1))
    route = next(c for c in dark[0]["status"]["conditions"] if c["type"] == "vkprovider.io/ServiceRoute")
    assert route["status"] == "False" and route["reason"] == "NoRoute"
    # It runs and listens in the backends namespace, at an address the node cannot reach.
    await eventually(lambda: _served(vnode, "dark"))
    dark_ips = {d.ip for d in vnode.clouds["dark"].store.deployments.values()}

    async def local_answers() -> LoadReport | None:
        report = await run_load(path.node, cluster_ip, 80, rate=20, duration=1)
        return report if report.answered_by else None

    await eventually(local_answers, timeout=90)
    report = await run_load(path.node, cluster_ip, 80, rate=50, duration=3)
    assert report.requests == 150 and report.failed == 0, report.to_json()
    assert set(report.answered_by) == {f"local/{home[0]['metadata']['name']}"}
    slices = await kube.request(
        "GET",
        f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        query={"labelSelector": "kubernetes.io/service-name=infer"},
    )
    published = {a for s in slices["items"] for e in s.get("endpoints") or [] for a in e["addresses"]}
    assert published == {home[0]["status"]["podIP"]} and not published & dark_ips


async def _served(vnode: VirtualNode, cloud: str) -> bool:
    """fakecloud holds a listener for each of the cloud's deployments."""
    server = vnode.clouds[cloud]
    ips = {d.ip for d in server.store.deployments.values()}
    return bool(ips) and server.replicas is not None and ips <= {ip for ip, _ in server.replicas.servers}
