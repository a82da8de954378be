"""Draining external replicas, on a real control plane with fakecloud: a deleted or evicted
replica's endpoint is seen terminating in the apiserver while fakecloud's own ledger still shows
its deployment billing, and the deployment ends only after the pod's deletionTimestamp (the
request plus its grace period); a force delete skips the wait. Order comes from the two
systems' records (the slice read before the ledger read, the ledger's end against the pod's
deadline, both on this host's clock), never from measuring how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support import eventually, ledger_entry
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, inference_deployment, start_virtual_node
from vkprovider.traffic.config import TrafficConfig

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
#: A pod whose grace is this long would keep its deployment this long if the wait applied.
LONG_GRACE = 600


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    routed = cloud_config("routed", 1.0, capacity=8).model_copy(update={"ip_range": "198.18.66.0/24"})
    node = await start_virtual_node(
        cluster, {"routed": routed}, traffic=TrafficConfig(drain_max_seconds=LONG_GRACE)
    )
    yield node
    await node.stop()


def deployment(name: str, node: str, replicas: int, grace: int) -> JSON:
    manifest = inference_deployment(name, node, replicas, grace_seconds=grace)
    manifest["spec"]["template"]["metadata"]["annotations"] = {"vkprovider.io/providers": "routed"}
    return manifest


async def endpoints(kube: KubeClient, namespace: str, service: str) -> dict[str, JSON]:
    """pod UID -> its endpoint in vkprovider's slices of ``service``, as the apiserver has them."""
    body = await kube.request(
        "GET",
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        query={"labelSelector": f"kubernetes.io/service-name={service}"},
    )
    ours = [
        s
        for s in body["items"]
        if s["metadata"]["labels"].get("endpointslice.kubernetes.io/managed-by") == "vkprovider.io"
    ]
    return {e["targetRef"]["uid"]: e for s in ours for e in s.get("endpoints") or []}


async def bill(node: VirtualNode, uid: str) -> JSON:
    """fakecloud's ledger entry for the pod's deployment: the independent record of its delete."""
    return await ledger_entry(node.clouds["routed"].url, uid)


async def bill_ended(node: VirtualNode, uid: str) -> JSON:
    """The pod's ledger entry once its deployment has ended."""

    async def ended() -> JSON | None:
        found = await bill(node, uid)
        return found if found["ended_at"] is not None else None

    done: JSON = await eventually(ended)
    return done


async def unpublished(kube: KubeClient, namespace: str, service: str, uid: str) -> None:
    """Until the pod's endpoint is gone from vkprovider's slices of ``service``."""

    async def gone() -> bool:
        return uid not in await endpoints(kube, namespace, service)

    await eventually(gone)


async def start(
    kube: KubeClient, namespace: str, node: VirtualNode, name: str, replicas: int, grace: int
) -> list[JSON]:
    """A Deployment of ``replicas`` external replicas behind a Service, once all are published ready."""
    await kube.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        body=deployment(name, node.name, replicas, grace),
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"name": "web", "port": 80, "targetPort": 8000}]},
    }
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service)

    async def ready() -> list[JSON] | None:
        published = await endpoints(kube, namespace, name)
        live = [e for e in published.values() if e["conditions"].get("ready")]
        if len(live) < replicas:
            return None
        pods = await kube.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": f"app={name}"}
        )
        return [p for p in pods["items"] if p["metadata"]["uid"] in published]

    return list(await eventually(ready))


async def assert_drained(
    kube: KubeClient, node: VirtualNode, namespace: str, service: str, pod: JSON
) -> None:
    """The pod's endpoint turns terminating while its deployment still bills; the deployment
    ends only after the pod's deletionTimestamp; then the endpoint goes with the pod."""
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]

    async def terminating() -> JSON | None:
        found = (await endpoints(kube, namespace, service)).get(uid)
        return found if found and found["conditions"].get("terminating") else None

    seen = await eventually(terminating)
    assert seen["conditions"] == {"ready": False, "serving": True, "terminating": True}
    entry = await bill(node, uid)  # read after the slice: the delete has not happened yet
    assert entry["ended_at"] is None, f"deployment stopped before its endpoint was seen terminating: {entry}"
    current = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    deadline = datetime.strptime(current["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")

    async def announced() -> bool:
        events = await kube.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/events",
            query={"fieldSelector": f"involvedObject.uid={uid}"},
        )
        return "Draining" in {e["reason"] for e in events["items"]}

    done = await bill_ended(node, uid)
    assert done["end_reason"] == "deleted"
    # fakecloud and the apiserver share this host's clock: the stop came after the grace period.
    assert done["ended_at"] >= deadline.replace(tzinfo=UTC).timestamp()

    await eventually(announced)
    await unpublished(kube, namespace, service, uid)


async def test_a_deleted_external_replica_drains_before_its_deployment_stops(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    pods = await start(kube, namespace, vnode, "drain", 2, grace=10)
    # One replica deleted (its pod's grace, 10 s), one evicted through the eviction API, as the
    # Descheduler does: both are graceful deletions and drain the same way.
    deleted, evicted = pods
    base = f"/api/v1/namespaces/{namespace}/pods"
    await kube.request("DELETE", f"{base}/{deleted['metadata']['name']}")
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": evicted["metadata"]["name"], "namespace": namespace},
    }
    await kube.request("POST", f"{base}/{evicted['metadata']['name']}/eviction", body=eviction)
    await asyncio.gather(
        assert_drained(kube, vnode, namespace, "drain", deleted),
        assert_drained(kube, vnode, namespace, "drain", evicted),
    )


async def test_a_force_delete_skips_the_drain(vnode: VirtualNode, namespace: str) -> None:
    kube = vnode.kube
    assert kube is not None
    # A grace this long, were it waited for, would outlast eventually()'s patience many times.
    (pod,) = await start(kube, namespace, vnode, "force", 1, grace=LONG_GRACE)
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
    await kube.request(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": 0}
    )
    assert (await bill_ended(vnode, uid))["end_reason"] == "deleted"
    await unpublished(kube, namespace, "force", uid)


async def test_a_restart_mid_drain_keeps_the_deadline_the_pod_carries(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    (pod,) = await start(kube, namespace, vnode, "resume", 1, grace=30)
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")

    async def terminating() -> bool:
        found = (await endpoints(kube, namespace, "resume")).get(uid)
        return bool(found and found["conditions"].get("terminating"))

    await eventually(terminating)
    current = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    deadline = datetime.strptime(current["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    # A new process knows nothing of the drain but what the pod and the slices say.
    await vnode.restart()
    kube = vnode.kube
    assert kube is not None
    done = await bill_ended(vnode, uid)
    assert done["end_reason"] == "deleted"
    # The new process did not stop it at once: it waited for the deadline the pod carries.
    assert done["ended_at"] >= deadline.replace(tzinfo=UTC).timestamp()
