"""Placement on the real control plane: NoCapacity failover with a blocklist, and the circuit breaker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.test_pod_lifecycle import create_deployment, events_with, pods_of
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.placement import PlacementConfig
from vkprovider.sim.local import (
    VirtualNode,
    cloud_config,
    inference_deployment,
    start_virtual_node,
)

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


async def admin(node: VirtualNode, cloud: str, method: str, path: str, body: JSON) -> None:
    async with httpx.AsyncClient(base_url=node.clouds[cloud].url) as client:
        resp = await client.request(method, f"/admin{path}", json=body)
        resp.raise_for_status()


@pytest.fixture
async def stale_catalog_node(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    # A long refresh interval keeps the catalog believing "cheap" has room after it sells out,
    # so the deploy itself meets NoCapacity, as happens when a cloud sells out between refreshes.
    placement = PlacementConfig(offer_refresh_seconds=3600, blocklist_ttl_seconds=3.0)
    node = await start_virtual_node(
        cluster,
        {"cheap": cloud_config("cheap", 1.0), "premium": cloud_config("premium", 3.0)},
        placement=placement,
    )
    yield node
    await node.stop()


async def test_cheapest_out_of_capacity_runs_on_next_in_one_reconcile(
    stale_catalog_node: VirtualNode, namespace: str
) -> None:
    node = stale_catalog_node
    kube, placer = node.kube, node.placer
    assert kube is not None and placer is not None
    await admin(node, "cheap", "PUT", "/capacity", {"capacity": 0})
    await create_deployment(kube, namespace, inference_deployment("failover", node.name, replicas=1))

    async def running() -> JSON | None:
        pods = [
            p for p in await pods_of(kube, namespace, "failover") if p["status"].get("phase") == "Running"
        ]
        return pods[0] if pods else None

    pod = await eventually(running)
    assert pod["metadata"]["annotations"]["vkprovider.io/provider"] == "premium"
    # One reconcile: cheap refused, premium took it, in the same decision; no failed attempt left behind.
    placement = json.loads(pod["metadata"]["annotations"]["vkprovider.io/placement"])
    assert "NoCapacity" in json.dumps(placement)
    events = await events_with(
        kube, namespace, pod["metadata"]["name"], "ProviderCreateSuccess", "ProviderNoCapacity"
    )
    reasons = [e["reason"] for e in events]
    assert reasons.count("ProviderCreateSuccess") == 1 and "ProviderCreateFailed" not in reasons
    (refused,) = [e for e in events if e["reason"] == "ProviderNoCapacity"]
    assert refused["type"] == "Warning" and "cheap" in refused["message"]
    entries = placer.blocklist.entries()
    assert [(e.provider, e.gpu_type, e.region) for e in entries] == [("cheap", "H100-SXM-80GB", "eu-west")]

    async def expired() -> bool:
        return not placer.blocklist.entries()

    await eventually(expired, timeout=10)


@pytest.fixture
async def breaker_node(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    placement = PlacementConfig(offer_refresh_seconds=1.0, breaker_seconds=1.0)
    node = await start_virtual_node(
        cluster, {"a": cloud_config("a", 1.0), "b": cloud_config("b", 2.0)}, placement=placement
    )
    yield node
    await node.stop()


async def node_object(node: VirtualNode) -> JSON:
    assert node.kube is not None
    result: JSON = await node.kube.request("GET", f"/api/v1/nodes/{node.name}")
    return result


def taint_keys(obj: JSON) -> set[str]:
    return {t["key"] for t in obj["spec"].get("taints") or []}


async def test_all_providers_down_opens_the_breaker_without_pod_churn(
    breaker_node: VirtualNode, namespace: str
) -> None:
    node = breaker_node
    kube = node.kube
    assert kube is not None
    await create_deployment(kube, namespace, inference_deployment("steady", node.name, replicas=2))

    async def two_running() -> list[JSON] | None:
        pods = [p for p in await pods_of(kube, namespace, "steady") if p["status"].get("phase") == "Running"]
        return pods if len(pods) == 2 else None

    running = await eventually(two_running)
    for cloud in node.clouds:
        await admin(node, cloud, "PATCH", "/knobs", {"outage": True})

    async def breaker_open() -> bool:
        obj = await node_object(node)
        gpus = obj["status"]["capacity"].get("nvidia.com/gpu")
        return "vkprovider.io/unavailable" in taint_keys(obj) and gpus == "0"

    await eventually(breaker_open, timeout=30)
    # The outage changes nothing the pods show: no Failed pods, no replacements, no Pending flip.
    pods = await pods_of(kube, namespace, "steady")
    assert {p["metadata"]["uid"] for p in pods} == {p["metadata"]["uid"] for p in running}
    assert all(p["status"]["phase"] == "Running" for p in pods)

    for cloud in node.clouds:
        await admin(node, cloud, "PATCH", "/knobs", {"outage": False})

    async def recovered() -> bool:
        obj = await node_object(node)
        gpus = int(obj["status"]["capacity"].get("nvidia.com/gpu", "0"))
        return "vkprovider.io/unavailable" not in taint_keys(obj) and gpus > 0

    await eventually(recovered, timeout=30)
    pods = await pods_of(kube, namespace, "steady")
    assert {p["metadata"]["uid"] for p in pods} == {p["metadata"]["uid"] for p in running}
    assert all(p["status"]["phase"] == "Running" for p in pods)


async def deployments_on(node: VirtualNode, cloud: str) -> list[JSON]:
    async with httpx.AsyncClient(base_url=node.clouds[cloud].url) as client:
        resp = await client.get("/admin/deployments")
        resp.raise_for_status()
        found: list[JSON] = resp.json()
        return found


@pytest.fixture
async def two_cloud_node(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(
        cluster, {"cheap": cloud_config("cheap", 1.0), "premium": cloud_config("premium", 3.0)}
    )
    yield node
    await node.stop()


async def test_a_create_that_cannot_be_confirmed_is_never_failed_over(
    two_cloud_node: VirtualNode, namespace: str
) -> None:
    """cheap answers every create try with 503 and then cannot answer the get that would tell
    whether one of them created the pod: placement waits for cheap instead of risking a twin on
    premium, and places the pod once cheap can answer."""
    node = two_cloud_node
    kube = node.kube
    assert kube is not None
    tries = node.placer.config.transient_attempts if node.placer is not None else 3
    rule = {"method": "POST", "path": "/v1/deployments", "status": 503, "times": tries}
    await admin(node, "cheap", "POST", "/rules", rule)
    await admin(
        node,
        "cheap",
        "POST",
        "/rules",
        {"method": "GET", "path": "/v1/deployments/{uid}", "status": 503, "times": 1},
    )
    await create_deployment(kube, namespace, inference_deployment("unsure", node.name, replicas=1))

    async def running() -> JSON | None:
        pods = [p for p in await pods_of(kube, namespace, "unsure") if p["status"].get("phase") == "Running"]
        return pods[0] if pods else None

    pod = await eventually(running)
    assert pod["metadata"]["annotations"]["vkprovider.io/provider"] == "cheap"
    uid = pod["metadata"]["uid"]
    assert [d["uid"] for d in await deployments_on(node, "cheap")] == [uid]
    assert await deployments_on(node, "premium") == []
