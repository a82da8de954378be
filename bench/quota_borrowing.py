"""A borrowing cohort queue that loses a node (issue 23): nominal quota and admitted usage, printed.

Real control plane with three kwok nodes x 8 GPUs and real Kueue v0.17.0. ClusterQueues cq-a
and cq-b share flavor local-gpu in one cohort; cq-a runs a 24-GPU gang (8 of them borrowed from
idle cq-b); then node gpu-1 is cordoned (16 GPUs left) and cq-b gets a 4-GPU job. Printed per
step: each queue's nominal, usage (borrowed), stopPolicy, the cohort's nominal total and what
Kueue has admitted against the healthy GPUs.

It runs the quota sync importable from ``sys.path``, so the same script gives the figure before
and after a change:

    .venv/bin/python bench/quota_borrowing.py                        # this tree
    git archive main | tar -x -C /tmp/main-src
    PYTHONPATH=/tmp/main-src .venv/bin/python bench/quota_borrowing.py   # main's sync

A sync with ``flavors:`` (this tree) splits the pool 2:1 between cq-a and cq-b. One without
(the single-queue sync before issue 23) syncs cq-a from the nodes labelled ``share=a`` (gpu-0,
gpu-1: what that sync could express), and cq-b keeps a hand-set 8. Not part of ``make bench``
(a Kueue control plane of its own, ~3 minutes); it asserts nothing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

import httpx

from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.quota.config import QuotaConfig
from vkprovider.quota.sync import QuotaSync

JSON = dict[str, Any]
GPU = "nvidia.com/gpu"
CQS = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
NS = "research"


def queue(name: str, gpus: int) -> JSON:
    resources = [{"name": GPU, "nominalQuota": gpus}, {"name": "cpu", "nominalQuota": 1000}]
    resources.append({"name": "memory", "nominalQuota": "10Ti"})
    group = {
        "coveredResources": [GPU, "cpu", "memory"],
        "flavors": [{"name": "local-gpu", "resources": resources}],
    }
    spec = {"cohortName": "borrow", "namespaceSelector": {}, "resourceGroups": [group]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def job(name: str, local_queue: str, pods: int, gpus: int) -> JSON:
    container = {
        "name": "c",
        "image": "trainer:bench",
        "resources": {"requests": {GPU: str(gpus), "cpu": "1", "memory": "1Gi"}, "limits": {GPU: str(gpus)}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": local_queue}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "suspend": True,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


def config(new_style: bool) -> QuotaConfig:
    if new_style:
        flavor = {
            "name": "local-gpu",
            "node_selector": {"pool": "local-gpu"},
            "resources": [GPU],
            "queues": [{"name": "cq-a", "share": 2}, {"name": "cq-b", "share": 1}],
        }
        return QuotaConfig.model_validate({"flavors": [flavor], "interval_seconds": 1})
    return QuotaConfig.model_validate(
        {"cluster_queue": "cq-a", "node_selector": {"share": "a"}, "resources": [GPU], "interval_seconds": 1}
    )


async def state(client: httpx.AsyncClient, name: str) -> tuple[int, int, int, str]:
    cq = (await client.get(f"{CQS}/{name}")).json()
    nominal = int(cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])
    total = borrowed = 0
    for entry in (cq.get("status") or {}).get("flavorsUsage") or []:
        for res in entry["resources"]:
            if entry["name"] == "local-gpu" and res["name"] == GPU:
                total, borrowed = int(res.get("total") or 0), int(res.get("borrowed") or 0)
    return nominal, total, borrowed, str(cq["spec"].get("stopPolicy") or "None")


async def admitted(client: httpx.AsyncClient, name: str) -> bool:
    uid = (await client.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")).json()["metadata"]["uid"]
    body = (
        await client.get(
            f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads",
            params={"labelSelector": f"kueue.x-k8s.io/job-uid={uid}"},
        )
    ).json()
    for wl in body.get("items") or []:
        for cond in (wl.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Admitted" and cond["status"] == "True":
                return True
    return False


async def settle(seconds: float = 8.0) -> None:
    await asyncio.sleep(seconds)  # a bench prints what it sees after a while; nothing is asserted


async def row(client: httpx.AsyncClient, step: str, healthy: int, extra: str = "") -> None:
    a, b = await state(client, "cq-a"), await state(client, "cq-b")
    print(
        f"| {step} | {a[0]} | {a[1]} ({a[2]}) | {a[3]} | {b[0]} | {b[3]} | {a[0] + b[0]} | "
        f"{a[1] + b[1]} / {healthy} | {extra} |"
    )


async def main() -> int:
    new_style = "flavors" in QuotaConfig.model_fields
    cluster = await Cluster.start(f"bench-quota-{os.getpid()}", gpu_nodes=3, kueue=True)
    try:
        async with cluster.http() as client:
            await client.post("/api/v1/namespaces", json={"metadata": {"name": NS}})
            await client.post("/apis/kueue.x-k8s.io/v1beta2/resourceflavors", json={
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "local-gpu"}, "spec": {"nodeLabels": {"pool": "local-gpu"}},
            })  # fmt: skip
            for name, gpus in (("cq-a", 16), ("cq-b", 8)):
                assert (await client.post(CQS, json=queue(name, gpus))).status_code == 201
                local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue"}
                local |= {
                    "metadata": {"name": f"lq-{name[-1]}", "namespace": NS},
                    "spec": {"clusterQueue": name},
                }
                await client.post(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues", json=local)
            for node in cluster.gpu_nodes[:2]:
                await client.patch(
                    f"/api/v1/nodes/{node}",
                    json={"metadata": {"labels": {"share": "a"}}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
            kube = await KubeClient.connect(str(cluster.kubeconfig))
            sync = QuotaSync(
                kube, config(new_style), EventRecorder(kube, component="vkprovider-quota", host="bench")
            )
            task = asyncio.create_task(sync.run())
            which = (
                "this tree (flavors: cq-a 2, cq-b 1)"
                if new_style
                else "single-queue sync (cq-a from share=a nodes)"
            )
            print(f"\nquota sync: {which}\n")
            print(
                "| step | cq-a nominal | cq-a usage (borrowed) | cq-a stopPolicy | cq-b nominal | cq-b stopPolicy | cohort nominal | admitted / healthy GPUs | |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            await settle()
            await row(client, "3 nodes", 24)
            gang = f"gang-{uuid.uuid4().hex[:4]}"
            await client.post(f"/apis/batch/v1/namespaces/{NS}/jobs", json=job(gang, "lq-a", 3, 8))
            await settle()
            await row(client, "cq-a runs 3 x 8 GPUs", 24, f"gang admitted: {await admitted(client, gang)}")
            await client.patch(
                f"/api/v1/nodes/{cluster.gpu_nodes[1]}",
                json={"spec": {"unschedulable": True}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            await settle()
            await row(client, "node gpu-1 cordoned", 16)
            small = f"small-{uuid.uuid4().hex[:4]}"
            await client.post(f"/apis/batch/v1/namespaces/{NS}/jobs", json=job(small, "lq-b", 1, 4))
            await settle()
            await row(
                client, "cq-b gets a 4-GPU job", 16, f"4-GPU job admitted: {await admitted(client, small)}"
            )
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()
    finally:
        await cluster.stop(remove=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
