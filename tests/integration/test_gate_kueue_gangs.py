"""The return wave reads real Kueue's gangs: a gang holding quota whose Job has no pod yet keeps
a replica out of its GPUs, a gang over the queue's quota does not, and the informers follow.

One control plane of its own (one kwok local-GPU node x 8 GPUs, Kueue v0.17.0, deploy/kueue
applied). The ClusterQueue gets an AdmissionCheck no controller ever satisfies, so a Job it
reserves quota for stays suspended with no pods: the state that lasts while admission checks
run (or the Job controller catches up), which the wave's snapshot cannot see from pods.

The external replica is a pod dict handed to the planner next to the cluster's real nodes and
pods (no virtual node runs here: what is under test is Kueue's side, read by the gate's own
informers; tests/integration/test_return_matrix.py runs the full cycle).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.kueue_support import NS, kueue_cluster, local_gpu_groups, submit_job, training_job
from tests.support import eventually
from tests.unit.gate.test_gate_fit import vk
from tests.unit.gate.test_gate_wave import PINS, planner, replica
from vkprovider.devcluster import Cluster
from vkprovider.gate.view import ClusterView
from vkprovider.kube.client import KubeClient

pytestmark = pytest.mark.cluster

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
JSON = dict[str, Any]


@pytest.fixture(scope="module")
async def kcluster() -> AsyncIterator[Cluster]:
    async with kueue_cluster(f"kueue-gangs-{os.getpid()}", gpu_nodes=1) as started:
        yield started


async def never_admitted(client: httpx.AsyncClient) -> None:
    """An AdmissionCheck no controller answers (marked Active by hand, as its controller would),
    required by ClusterQueue ``training`` with 8 GPUs of nominal quota."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "never"},
        "spec": {"controllerName": "example.com/never"},
    }
    resp = await client.post(f"{KUEUE}/admissionchecks", json=check)
    assert resp.status_code == 201, resp.text
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "test",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }
    resp = await client.patch(
        f"{KUEUE}/admissionchecks/never/status",
        json=status,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text
    patch = {
        "spec": {
            "admissionChecksStrategy": {"admissionChecks": [{"name": "never"}]},
            "resourceGroups": local_gpu_groups(8, 128, "1Ti"),
        }
    }
    resp = await client.patch(
        f"{KUEUE}/clusterqueues/training",
        json=patch,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


async def submit(client: httpx.AsyncClient, prefix: str, pods: int, gpus: int) -> str:
    return await submit_job(client, training_job(prefix, pods, gpus, queue="research"))


def wave(view: ClusterView) -> tuple[list[str], list[str]]:
    """(replicas marked, gangs held) for one external 6-GPU replica against the real cluster."""
    assert view.kueue is not None
    pods = list(view.all_pods())
    gangs = view.kueue.gangs(pods)
    assert gangs is not None, "Kueue's caches synced"
    nodes = [*view.all_nodes(), vk()]
    plan = planner().plan(nodes, [*pods, replica("r1", 6)], 0.0, PINS, gangs=gangs)
    return plan.wave, plan.gangs


async def test_a_gang_holding_quota_without_pods_keeps_a_replica_out(kcluster: Cluster) -> None:
    async with kcluster.http() as client:
        await never_admitted(client)
        kube = await KubeClient.connect(str(kcluster.kubeconfig))
        view = ClusterView(kube, kueue=True)
        task = asyncio.create_task(view.run())
        try:
            await view.wait_synced()
            assert view.kueue is not None
            await eventually(lambda: _true(view.kueue is not None and view.kueue.synced), timeout=60)
            assert wave(view) == (["ns/r1"], [])  # 8 local GPUs free: the replica comes home

            gang = await submit(client, "gang", pods=1, gpus=4)  # reserved, held by the check
            marked, (held,) = await eventually(lambda: _held(view, gang), timeout=60)
            assert marked == [] and held.startswith(f"{NS}/job-{gang}-")
            # the view may hold the gang as Kueue's next admission before Kueue writes its reservation

            async def reserved() -> set[tuple[str, str]] | None:
                reading = await _conditions(client, gang)
                return reading if ("QuotaReserved", "True") in reading else None

            reading = await eventually(reserved, timeout=60)
            assert ("Admitted", "True") not in reading
            # its Job is suspended, no pod exists: only the Workload says its 4 GPUs are taken
            resp = await client.get(
                f"/api/v1/namespaces/{NS}/pods", params={"labelSelector": f"job-name={gang}"}
            )
            assert resp.json()["items"] == []

            over = await submit(client, "over", pods=2, gpus=4)  # 8 > the 4 left: waits
            await eventually(lambda: _pending(client, over), timeout=60)
            assert wave(view) == ([], [held])  # the over-quota gang holds nothing

            await client.request(
                "DELETE",
                f"/apis/batch/v1/namespaces/{NS}/jobs/{gang}",
                params={"propagationPolicy": "Background"},
            )
            await client.request(
                "DELETE",
                f"/apis/batch/v1/namespaces/{NS}/jobs/{over}",
                params={"propagationPolicy": "Background"},
            )
            await eventually(lambda: _true(wave(view) == (["ns/r1"], [])), timeout=60)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()


async def _true(value: bool) -> bool:
    return value


async def _held(view: ClusterView, _gang: str) -> tuple[list[str], list[str]] | None:
    result = wave(view)
    return result if result[1] else None


async def _conditions(client: httpx.AsyncClient, job: str) -> set[tuple[str, str]]:
    """The conditions of the Job's Workload (empty until it exists)."""
    resp = await client.get(f"{KUEUE}/namespaces/{NS}/workloads")
    for wl in resp.json().get("items") or []:
        if job in [ref.get("name") for ref in wl["metadata"].get("ownerReferences") or []]:
            return {(c["type"], c["status"]) for c in wl.get("status", {}).get("conditions") or []}
    return set()


async def _pending(client: httpx.AsyncClient, job: str) -> bool:
    return ("QuotaReserved", "False") in await _conditions(client, job)
