"""kwok-simulated "local GPU" nodes: ordinary nodes whose pods become Running without a kubelet.

kwok manages only nodes carrying the ``kwok.x-k8s.io/node=fake`` annotation, so the
virtual node that vkprovider registers is never touched by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_POOL_LABEL = "pool"
GPU_POOL_VALUE = "local-gpu"
GPU_POOL_SELECTOR = f"{GPU_POOL_LABEL}={GPU_POOL_VALUE}"
GPUS_PER_NODE = 8


def args(kubeconfig: Path, server_port: int) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
        f"--server-address=127.0.0.1:{server_port}",
        "--node-lease-duration-seconds=8",  # renewed every 2 s: well inside the 10 s grace
        "--cidr=10.244.0.0/16",
        "--node-ip=127.0.0.2",
    ]


def node_manifest(name: str, gpus: int = GPUS_PER_NODE) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                GPU_POOL_LABEL: GPU_POOL_VALUE,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "nvidia.com/gpu.product": "H100-SXM-80GB",
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }


async def create_node(client: httpx.AsyncClient, name: str, gpus: int = GPUS_PER_NODE) -> None:
    resp = await client.post("/api/v1/nodes", json=node_manifest(name, gpus))
    if resp.status_code not in (201, 409):
        raise RuntimeError(f"creating kwok node {name} failed: {resp.status_code} {resp.text[:300]}")
