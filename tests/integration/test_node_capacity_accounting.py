"""The node advertises what it can hold (issue 16, item 5): allocatable ``nvidia.com/gpu`` equals
the providers' free GPUs plus the GPUs this node's pods hold, across a scale-up, on the real
control plane with real fakecloud servers (the scheduler subtracts the pods' GPUs itself)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.service_support import Running, running_pods, running_service
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.sim.local import fakecloud_module, inference_deployment

pytestmark = pytest.mark.cluster

GPUS_PER_OFFER = {"one-h100": 1, "two-h100": 2}


def cloud(name: str, offer_id: str, gpus: int, price: float, capacity: int) -> Any:
    return fakecloud_module("config").parse_config(
        {
            "provider": name,
            "seed": 3,
            "catalog": [
                {
                    "id": offer_id,
                    "gpu_type": "H100-SXM-80GB",
                    "gpu_count": gpus,
                    "region": "eu-west",
                    "price_per_hour": price,
                    "capacity": capacity,
                }
            ],
            "lifecycle": {"provisioning_seconds": 0.2, "serving_after_seconds": 0.3},
        }
    )


async def free_gpus(svc: Running) -> int:
    """What the providers themselves say is free: capacity x GPUs per offer."""
    total = 0
    for server in svc.clouds.values():
        async with httpx.AsyncClient(base_url=server.url) as client:
            offers = (await client.get("/admin/offers")).json()
        total += sum(capacity * GPUS_PER_OFFER[offer_id] for offer_id, capacity in offers.items())
    return total


async def used_gpus(svc: Running, namespace: str) -> int:
    pods = await svc.pods(namespace)
    return sum(
        int(c["resources"]["limits"]["nvidia.com/gpu"])
        for p in pods
        if p["spec"].get("nodeName") == svc.node and p["status"].get("phase") not in ("Succeeded", "Failed")
        for c in p["spec"]["containers"]
    )


async def test_allocatable_is_free_plus_used_across_a_scale_up(cluster: Cluster, namespace: str) -> None:
    clouds = {
        "small": cloud("small", "one-h100", 1, 1.0, capacity=3),
        "large": cloud("large", "two-h100", 2, 4.0, capacity=2),  # 1-GPU pods on 2-GPU offers
    }
    async with running_service(cluster, clouds) as svc:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments"

        async def balanced() -> tuple[int, int, int] | None:
            node = await svc.get_node()
            allocatable = int(node["status"]["allocatable"]["nvidia.com/gpu"])
            free, used = await free_gpus(svc), await used_gpus(svc, namespace)
            return (allocatable, free, used) if allocatable == free + used else None

        assert await eventually(balanced, timeout=30) == (3 + 4, 3 + 4, 0)
        await svc.kube.request("POST", path, body=inference_deployment("web", svc.node, 2))
        await running_pods(svc, namespace, 2)
        assert await eventually(balanced, timeout=30) == (1 + 4 + 2, 1 + 4, 2)

        patch = {"spec": {"replicas": 5}}
        await svc.kube.request(
            "PATCH", f"{path}/web", body=patch, content_type="application/merge-patch+json"
        )
        await running_pods(svc, namespace, 5)
        # Every offer is taken: nothing free, and the 5 GPUs the pods request are what the node
        # holds, so the scheduler sees exactly zero room (not -5, not +2 for the bigger offers).
        assert await eventually(balanced, timeout=30) == (5, 0, 5)
