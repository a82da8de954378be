"""Pod throughput: N pods bound to the virtual node -> Running, and API calls per pod lifecycle.

Real control plane, real fakecloud at zero latency (provisioning and serving immediate), the real
node agent and pod controller in this process. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_pods.py --pods 200                      # service defaults
    .venv/bin/python bench/bench_pods.py --pods 200 --provider-rate 1000 --kube-qps 1000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.placement import PlacementConfig
from vkprovider.placement.config import RateLimitConfig
from vkprovider.sim.local import cloud_config, start_virtual_node


def pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "pods"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "containers": [
                {
                    "name": "server",
                    "image": "registry.example/llm:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


async def phases(admin: KubeClient, namespace: str) -> list[str]:
    body = await admin.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    return [p["status"].get("phase", "") for p in body["items"]]


async def run(pods: int, workers: int, provider_rate: float, kube_qps: float) -> None:
    cluster = await Cluster.start("bench-pods", gpu_nodes=0)
    admin = await KubeClient.connect(str(cluster.kubeconfig), qps=1000, burst=1000)
    cloud = cloud_config("zero", 1.0, capacity=pods * 2, provisioning_seconds=0, serving_after_seconds=0)
    node = await start_virtual_node(
        cluster,
        {"zero": cloud},
        placement=PlacementConfig(
            offer_refresh_seconds=5.0,
            rate_limit=RateLimitConfig(per_second=provider_rate, burst=max(1, int(provider_rate))),
        ),
        kube_qps=kube_qps,
        workers=workers,
        status_poll_seconds=0.5,
    )
    assert node.kube is not None
    namespace = "bench"
    try:
        await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        for _ in range(100):
            try:
                await admin.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
                break
            except Exception:
                await asyncio.sleep(0.1)
        idle_start, idle_calls = time.perf_counter(), node.kube.calls
        await asyncio.sleep(3.0)
        background_rate = (node.kube.calls - idle_calls) / (time.perf_counter() - idle_start)

        limit = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with limit:
                await admin.request(
                    "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod(f"p-{i:04d}", node.name)
                )

        calls0, started = node.kube.calls, time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(pods)))
        created = time.perf_counter()
        async with asyncio.timeout(600):
            while sum(p in ("Running", "Failed") for p in await phases(admin, namespace)) < pods:
                await asyncio.sleep(0.2)
        running = time.perf_counter()
        failed = (await phases(admin, namespace)).count("Failed")
        up_calls = node.kube.calls - calls0 - background_rate * (running - started)

        calls1 = node.kube.calls
        await admin.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": "bench=pods"}
        )
        while await phases(admin, namespace):
            await asyncio.sleep(0.2)
        gone = time.perf_counter()
        down_calls = node.kube.calls - calls1 - background_rate * (gone - running)

        print(
            f"pods: {pods}, workers: {workers}, provider rate limit: {provider_rate}/s, "
            f"kube client QPS: {kube_qps} (burst {int(2 * kube_qps)}), "
            f"fakecloud latency: 0, failed: {failed}"
        )
        print(f"create calls issued in {created - started:.2f}s")
        print(f"bound -> Running: {running - started:.2f}s total, {pods / (running - started):.1f} pods/s")
        print(f"graceful delete -> gone: {gone - running:.2f}s, {pods / (gone - running):.1f} pods/s")
        print(
            f"API calls by the service per pod: {up_calls / pods:.2f} to Running, {down_calls / pods:.2f} to deletion,"
        )
        print(
            f"  {(up_calls + down_calls) / pods:.2f} per lifecycle (background node agent: {background_rate:.2f} calls/s)"
        )
    finally:
        await node.stop()
        await admin.close()
        await cluster.stop(remove=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument(
        "--provider-rate",
        type=float,
        default=10.0,
        help="client-side deploys/s per provider (config default 10)",
    )
    parser.add_argument("--kube-qps", type=float, default=50.0, help="API client QPS (config default 50)")
    args = parser.parse_args()
    asyncio.run(run(args.pods, args.workers, args.provider_rate, args.kube_qps))


if __name__ == "__main__":
    main()
