"""Local replicas first, on a real control plane: the virtual node sits in a zone of its own, and
for a Service with a close ``trafficDistribution`` the endpoints vkprovider publishes carry that
zone and the hints kube-proxy reads — accepted by the apiserver as written (a field it dropped
would make every reconcile write again), so the slices settle with no further write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.sim.local import VirtualNode, cloud_config, inference_deployment, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    routed = cloud_config("routed", 1.0, capacity=8).model_copy(update={"ip_range": "198.18.67.0/24"})
    node = await start_virtual_node(cluster, {"routed": routed})
    yield node
    await node.stop()


async def test_published_endpoints_carry_the_virtual_nodes_zone_and_close_hints(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None and vnode.controller is not None
    node = await kube.request("GET", f"/api/v1/nodes/{vnode.name}")
    zone = node["metadata"]["labels"][ZONE]
    assert zone == "vkprovider-external"
    manifest = inference_deployment("near", vnode.name, 2)
    manifest["spec"]["template"]["metadata"]["annotations"] = {"vkprovider.io/providers": "routed"}
    await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=manifest)
    for name, distribution in (
        ("zonal", "PreferSameZone"),
        ("close", "PreferClose"),
        ("nodal", "PreferSameNode"),
    ):
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {
                "selector": {"app": "near"},
                "ports": [{"port": 80, "targetPort": 8000}],
                "trafficDistribution": distribution,
            },
        }
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service)

    async def hinted(name: str) -> list[JSON] | None:
        body = await kube.request(
            "GET",
            f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
            query={
                "labelSelector": f"kubernetes.io/service-name={name},endpointslice.kubernetes.io/managed-by=vkprovider.io"
            },
        )
        found = [e for s in body["items"] for e in s.get("endpoints") or []]
        ready = [e for e in found if e["conditions"].get("ready") and e.get("hints")]
        return found if len(ready) == 2 else None

    for name in ("zonal", "close"):
        for endpoint in await eventually(partial(hinted, name)):
            assert endpoint["zone"] == zone
            assert endpoint["hints"] == {"forZones": [{"name": zone}]}
    for endpoint in await eventually(partial(hinted, "nodal")):
        assert endpoint["hints"]["forNodes"] == [{"name": vnode.name}]

    # What the apiserver stored is what we meant: comparing again writes nothing.
    publisher = vnode.controller.term.publisher
    assert publisher is not None
    before = publisher.writes
    for name in ("zonal", "close", "nodal"):
        await publisher.reconcile(f"{namespace}/{name}")
    assert publisher.writes == before


async def test_with_local_replicas_every_ready_endpoint_is_zone_hinted(
    vnode: VirtualNode, namespace: str
) -> None:
    """kube-proxy keeps a zone's traffic local only while *every* ready endpoint has a zone hint:
    the cluster's EndpointSlice controller hints the local replicas (their nodes' zone), we hint
    the external ones (the virtual node's zone), so both kinds together meet that condition."""
    kube = vnode.kube
    assert kube is not None
    local_nodes = (await kube.request("GET", "/api/v1/nodes", query={"labelSelector": "type=kwok"}))["items"]
    assert local_nodes
    names = [n["metadata"]["name"] for n in local_nodes]

    async def label(zone: str | None) -> None:
        for name in names:
            await kube.request(
                "PATCH",
                f"/api/v1/nodes/{name}",
                body={"metadata": {"labels": {ZONE: zone}}},
                content_type="application/merge-patch+json",
            )

    await label("local-a")  # a cloud cluster's nodes carry it; the dev cluster's kwok nodes do not
    try:
        external = inference_deployment("mixed-out", vnode.name, 1)
        external["spec"]["template"]["metadata"]["annotations"] = {"vkprovider.io/providers": "routed"}
        external["spec"]["selector"]["matchLabels"] = {"app": "mixed", "where": "out"}
        external["spec"]["template"]["metadata"]["labels"] = {"app": "mixed", "where": "out"}
        local: JSON = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "mixed-home"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "mixed", "where": "home"}},
                "template": {
                    "metadata": {"labels": {"app": "mixed", "where": "home"}},
                    "spec": {
                        "nodeSelector": {"type": "kwok"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": "server",
                                "image": "registry.example/llm-server:1.0",
                                "ports": [{"containerPort": 8000}],
                            }
                        ],
                    },
                },
            },
        }
        for manifest in (external, local):
            await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=manifest)
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "mixed"},
            "spec": {
                "selector": {"app": "mixed"},
                "ports": [{"port": 80, "targetPort": 8000}],
                "trafficDistribution": "PreferSameZone",
            },
        }
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service)

        async def both_hinted() -> dict[str, JSON] | None:
            body = await kube.request(
                "GET",
                f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                query={"labelSelector": "kubernetes.io/service-name=mixed"},
            )
            ready = {
                s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]: e
                for s in body["items"]
                for e in s.get("endpoints") or []
                if e["conditions"].get("ready")
            }
            hinted = all(e.get("hints", {}).get("forZones") for e in ready.values())
            return ready if len(ready) == 2 and hinted else None

        ready = await eventually(both_hinted)
        assert ready["endpointslice-controller.k8s.io"]["hints"]["forZones"] == [{"name": "local-a"}]
        assert ready["vkprovider.io"]["hints"]["forZones"] == [{"name": "vkprovider-external"}]
    finally:
        await label(None)
