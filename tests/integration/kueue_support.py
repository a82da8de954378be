"""A dev cluster with real Kueue and the repo's deploy/kueue objects, and the training Job the
Kueue tests submit: shared by test_kueue.py and test_gate_kueue_gangs.py so both exercise the
same objects."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from vkprovider.devcluster import Cluster
from vkprovider.devcluster.build import Toolchain

REPO = Path(__file__).resolve().parents[2]
NS = "research"
JSON = dict[str, Any]


@contextlib.asynccontextmanager
async def kueue_cluster(name: str, **start: Any) -> AsyncIterator[Cluster]:
    """A cluster of its own (``Cluster.start(name, kueue=True, **start)``) with deploy/kueue
    applied, stopped and removed afterwards unless ``VKPROVIDER_TEST_KEEP_CLUSTER`` is set."""
    started = await Cluster.start(name, kueue=True, **start)
    try:
        kubectl = Toolchain.default().binary("kubectl")
        await asyncio.to_thread(
            subprocess.run,
            [str(kubectl), f"--kubeconfig={started.kubeconfig}", "apply", "-k", str(REPO / "deploy/kueue")],
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield started
    finally:
        if not os.environ.get("VKPROVIDER_TEST_KEEP_CLUSTER"):
            await started.stop(remove=True)


def local_gpu_groups(gpus: int, cpu: int, memory: str) -> list[JSON]:
    """A ClusterQueue's ``resourceGroups``: flavor ``local-gpu`` with these nominal quotas."""
    resources = [
        {"name": "nvidia.com/gpu", "nominalQuota": gpus},
        {"name": "cpu", "nominalQuota": cpu},
        {"name": "memory", "nominalQuota": memory},
    ]
    return [
        {
            "coveredResources": ["nvidia.com/gpu", "cpu", "memory"],
            "flavors": [{"name": "local-gpu", "resources": resources}],
        }
    ]


def training_job(
    prefix: str,
    pods: int,
    gpus: int,
    *,
    queue: str,
    priority_class: str | None = None,
    indexed: bool = False,
    annotations: dict[str, str] | None = None,
) -> JSON:
    """A gang of ``pods`` trainer pods of ``gpus`` GPUs each for LocalQueue ``queue`` in ``NS``,
    named ``prefix-<random>``; with ``priority_class`` as Kueue's and the pods' priority."""
    labels = {"kueue.x-k8s.io/queue-name": queue}
    pod: JSON = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "trainer",
                "image": "trainer:test",
                "resources": {
                    "requests": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }
    template: JSON = {"spec": pod}
    spec: JSON = {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
        pod["priorityClassName"] = priority_class
    if indexed:
        spec["completionMode"] = "Indexed"
    if annotations is not None:
        template["metadata"] = {"annotations": annotations}
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": spec,
    }


async def submit_job(client: httpx.AsyncClient, job: JSON) -> str:
    """Create ``job`` (from :func:`training_job`) and return its name."""
    resp = await client.post(f"/apis/batch/v1/namespaces/{NS}/jobs", json=job)
    assert resp.status_code == 201, resp.text
    name: str = job["metadata"]["name"]
    return name
