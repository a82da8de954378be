"""A running Job pod on the virtual node that is deleted (``kubectl delete``, a drain, a
preemption) was interrupted: the Job must count a failure, never a completion (issue 22,
defect 3). The Job controller keeps the pod with its tracking finalizer and reads the outcome
the service writes; fakecloud deletes at once and reports no exit code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support import eventually, gpu_worker_pod
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(cluster, {"cheap": cloud_config("cheap", 1.0, capacity=4)})
    yield node
    await node.stop()


def job(name: str, node: str, *, indexed: bool, backoff_limit: int) -> JSON:
    """One long-running GPU pod (600 s: it never finishes within the test) on ``node``."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "backoffLimit": backoff_limit,
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            },
            "template": {"spec": gpu_worker_pod(node, run_seconds=600, grace_seconds=5)},
        },
    }


async def running_pod_of(kube: KubeClient, namespace: str, name: str) -> JSON:
    async def running() -> JSON | None:
        body = await kube.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": f"job-name={name}"}
        )
        pods = [
            p
            for p in body["items"]
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        return pods[0] if pods else None

    pod: JSON = await eventually(running, timeout=90)
    assert "batch.kubernetes.io/job-tracking" in (pod["metadata"].get("finalizers") or [])
    return pod


async def job_status(kube: KubeClient, namespace: str, name: str) -> JSON:
    found = await kube.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
    return dict(found.get("status") or {})


async def test_a_deleted_running_job_pod_is_a_failure_not_a_completion(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    manifest = job("train", vnode.name, indexed=False, backoff_limit=0)
    await kube.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=manifest)
    pod = await running_pod_of(kube, namespace, "train")
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")

    async def counted() -> JSON | None:
        status = await job_status(kube, namespace, "train")
        return status if status.get("failed") or status.get("succeeded") else None

    status = await eventually(counted, timeout=90)
    assert not status.get("succeeded"), status  # the interrupted pod is no completion
    assert status.get("failed") == 1
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    assert conditions.get("Complete") != "True"


async def test_an_evicted_indexed_job_pod_leaves_its_index_open_and_is_replaced(
    vnode: VirtualNode, namespace: str
) -> None:
    """Eviction sets ``DisruptionTarget`` before the delete; the status the service writes keeps
    it, so the podFailurePolicy ignores the failure, and the index is not marked done."""
    kube = vnode.kube
    assert kube is not None
    manifest = job("index", vnode.name, indexed=True, backoff_limit=0)
    await kube.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=manifest)
    pod = await running_pod_of(kube, namespace, "index")
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body=eviction)

    replacement = await running_pod_of(kube, namespace, "index")  # ignored: backoffLimit 0 not spent
    assert replacement["metadata"]["uid"] != uid
    status = await job_status(kube, namespace, "index")
    assert not status.get("succeeded") and not status.get("completedIndexes"), status
    assert not status.get("failed"), status  # DisruptionTarget survived: the failure was ignored
