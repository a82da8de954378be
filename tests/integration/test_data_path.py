"""Real requests through a Service: a control plane started with its data path (kube-proxy in
nftables mode in a node namespace, listeners at the local kwok pods' IPs, fakecloud serving its
deployments at the addresses it reports), vkprovider publishing the external replicas, and the
bounded load generator sending to the ClusterIP from the node namespace. Nothing stands in for
kube-proxy: a request reaches a replica only through the rules it wrote."""

from __future__ import annotations

import asyncio
import ipaddress
import subprocess

import pytest

from tests.integration import datapath_support
from tests.integration.datapath_support import DARK, external, local, ready_pods, served, setup
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.datapath import POD_CIDR, SERVICE_CIDR
from vkprovider.devcluster.loadgen import LoadReport, run_load
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import get
from vkprovider.sim.local import VirtualNode

pytestmark = pytest.mark.cluster

dp_cluster, vnode, ns = datapath_support.dp_cluster, datapath_support.vnode, datapath_support.ns


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
    await eventually(lambda: served(vnode, "dark"))
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
