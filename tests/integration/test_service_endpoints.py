"""External replicas as Service endpoints, on a real control plane with kube-controller-manager's
own EndpointSlice controller running: a Service over replicas on the virtual node gets slices
with the fakecloud's addresses and mapped ports, the controller's slices never carry the pods'
provider-side IPs, and a provider with no route leaves its replicas unpublished and says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, inference_deployment, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    routed = cloud_config("routed", 1.0, capacity=8).model_copy(update={"ip_range": "198.18.64.0/24"})
    dark = cloud_config("dark", 1.0, capacity=8)
    dark = dark.model_copy(update={"knobs": dark.knobs.model_copy(update={"routable": False})})
    node = await start_virtual_node(cluster, {"routed": routed, "dark": dark})
    yield node
    await node.stop()


def deployment(name: str, node: str, replicas: int, provider: str) -> JSON:
    manifest = inference_deployment(name, node, replicas)
    template = manifest["spec"]["template"]
    template["metadata"]["annotations"] = {"vkprovider.io/providers": provider}
    template["spec"]["containers"][0]["ports"] = [
        {"name": "http", "containerPort": 8000},
        {"name": "metrics", "containerPort": 9100},
    ]
    return manifest


def service(name: str, app: str, ports: list[JSON], **spec: Any) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": app}, "ports": ports, **spec},
    }


async def slices_of(kube: KubeClient, namespace: str, service_name: str) -> list[JSON]:
    body = await kube.request(
        "GET",
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        query={"labelSelector": f"kubernetes.io/service-name={service_name}"},
    )
    return list(body["items"])


async def cloud_ips(node: VirtualNode, cloud: str) -> dict[str, str]:
    """pod UID -> the address fakecloud reports for its running deployment."""
    async with httpx.AsyncClient(base_url=node.clouds[cloud].url) as http:
        answer = (await http.get("/admin/deployments")).json()
    return {d["uid"]: d["status"]["ip"] for d in answer if d["status"].get("ip")}


async def test_a_service_over_external_replicas_gets_their_addresses_and_mapped_ports(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    base = f"/api/v1/namespaces/{namespace}"
    await kube.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        body=deployment("infer", vnode.name, 2, "routed"),
    )
    web = [
        {"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "targetPort": 9100, "protocol": "TCP"},
    ]
    await kube.request("POST", f"{base}/services", body=service("infer", "infer", web))
    await kube.request(
        "POST", f"{base}/services", body=service("infer-dns", "infer", web[:1], clusterIP="None")
    )
    # The user's own: no selector, so neither the controller nor vkprovider may touch it.
    await kube.request(
        "POST", f"{base}/services", body={**service("byhand", "infer", web[:1]), "spec": {"ports": web[:1]}}
    )

    async def published() -> list[JSON] | None:
        ours = [
            s
            for s in await slices_of(kube, namespace, "infer")
            if s["metadata"]["labels"][MANAGED_BY] == "vkprovider.io"
        ]
        ready = [e for s in ours for e in s.get("endpoints") or [] if e["conditions"].get("ready")]
        return ours if len(ready) == 2 else None

    ours = await eventually(published)
    ips = await cloud_ips(vnode, "routed")
    endpoints = {e["targetRef"]["uid"]: e for s in ours for e in s["endpoints"]}
    assert {uid: e["addresses"][0] for uid, e in endpoints.items()} == ips  # the fakecloud's addresses
    assert all(ip.startswith("198.18.64.") for ip in ips.values())
    for found in ours:
        assert found["addressType"] == "IPv4"
        assert sorted((p["name"], p["port"]) for p in found["ports"]) == [("metrics", 9100), ("web", 8000)]
        assert found["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert all(e["nodeName"] == vnode.name for e in endpoints.values())

    pods = (await kube.request("GET", f"{base}/pods", query={"labelSelector": "app=infer"}))["items"]
    for pod in pods:
        assert not pod["status"].get("podIP"), "an external pod must not show its provider-side IP"
        route = next(c for c in pod["status"]["conditions"] if c["type"] == "vkprovider.io/ServiceRoute")
        assert route["status"] == "True" and ips[pod["metadata"]["uid"]] in route["message"]

    # The cluster's own controller handles the Service too (its slice exists), and never
    # publishes an external pod: not the reachable address, not a provider-side IP.
    async def controller_slice() -> list[JSON] | None:
        mine = [
            s
            for s in await slices_of(kube, namespace, "infer")
            if s["metadata"]["labels"][MANAGED_BY] == CONTROLLER
        ]
        return mine or None

    for found in await eventually(controller_slice):
        assert not found.get("endpoints"), f"the controller published {found.get('endpoints')}"

    # A restart rebuilds from the apiserver: every Service compared again, nothing rewritten.
    versions = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in ours}
    await vnode.restart()
    kube = vnode.kube
    assert kube is not None and vnode.controller is not None

    async def compared() -> bool:
        publisher = vnode.controller.term.publisher  # type: ignore[union-attr]
        return publisher is not None and publisher.reconciles >= 3 and not publisher._dirty

    await eventually(compared)
    after = await _ours(kube, namespace, "infer") or []
    assert {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in after} == versions
    assert vnode.controller.term.publisher.writes == 0  # type: ignore[union-attr]

    headless = await eventually(lambda: _ours(kube, namespace, "infer-dns"))
    assert all(s["metadata"]["labels"].get("service.kubernetes.io/headless") == "" for s in headless)
    assert sum(len(s["endpoints"]) for s in headless) == 2
    assert await slices_of(kube, namespace, "byhand") == []

    # A replica going away leaves the slice; the Service going away takes our slices with it.
    await kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/infer/scale",
        body={"spec": {"replicas": 1}},
        content_type="application/merge-patch+json",
    )

    async def one_left() -> bool:
        left = {
            e["targetRef"]["uid"] for s in await _ours(kube, namespace, "infer") or [] for e in s["endpoints"]
        }
        return len(left) == 1

    await eventually(one_left)
    await kube.request("DELETE", f"{base}/services/infer")

    async def collected() -> bool:
        return not await _ours(kube, namespace, "infer")

    await eventually(collected)


async def _ours(kube: KubeClient, namespace: str, service_name: str) -> list[JSON] | None:
    found = [
        s
        for s in await slices_of(kube, namespace, service_name)
        if s["metadata"]["labels"][MANAGED_BY] == "vkprovider.io"
    ]
    return found or None


async def test_a_provider_without_a_route_leaves_its_replicas_unpublished_and_says_so(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    base = f"/api/v1/namespaces/{namespace}"
    await kube.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        body=deployment("dark", vnode.name, 1, "dark"),
    )
    await kube.request(
        "POST",
        f"{base}/services",
        body=service("dark", "dark", [{"name": "web", "port": 80, "targetPort": 8000}]),
    )

    async def says_no_route() -> JSON | None:
        pods = (await kube.request("GET", f"{base}/pods", query={"labelSelector": "app=dark"}))["items"]
        for pod in pods:
            for c in pod["status"].get("conditions") or []:
                if c["type"] == "vkprovider.io/ServiceRoute" and c["status"] == "False":
                    return dict(pod)
        return None

    pod = await eventually(says_no_route)
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "vkprovider.io/ServiceRoute")
    assert condition["reason"] == "NoRoute" and "dark" in condition["message"]
    assert pod["status"]["phase"] == "Running" and not pod["status"].get("podIP")

    async def warned() -> bool:
        events = (
            await kube.request(
                "GET",
                f"{base}/events",
                query={"fieldSelector": f"involvedObject.name={pod['metadata']['name']}"},
            )
        )["items"]
        return any(e["reason"] == "NoRoute" and e["type"] == "Warning" for e in events)

    await eventually(warned)
    dark_ips = set((await cloud_ips(vnode, "dark")).values())
    assert dark_ips  # it runs, at an address nobody can reach
    for found in await slices_of(kube, namespace, "dark"):
        published = {a for e in found.get("endpoints") or [] for a in e["addresses"]}
        assert not published, f"{found['metadata']['labels'][MANAGED_BY]} published {published}"
