"""Requests through the dev cluster's real data path: a Service over local kwok replicas and
external fakecloud replicas, kube-proxy (nftables) in the node namespace, the bounded load
generator at the ClusterIP (docs/virtual-node.md, *The real data path*).

    .venv/bin/python bench/datapath_load.py [--rate 200] [--duration 10] [--round-trip 0.02]

Two figures: (1) for each external replica, pod Ready → the first request through the ClusterIP
that it answers (publication by vkprovider + kube-proxy's resync, as a client sees it; probed in
0.1 s bursts at 200 req/s between 20 ms polls of the pod, so within about ±0.15 s); (2) a steady load: requests, failed, p50/p99 latency per local vs
provider (the provider's answers include ``--round-trip``). Needs root (network namespaces);
prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from vkprovider.devcluster import Cluster
from vkprovider.devcluster.datapath import provider_range, why_unavailable
from vkprovider.devcluster.kwok import GPU_POOL_SELECTOR
from vkprovider.devcluster.loadgen import run_load
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import cloud_config, inference_deployment, start_virtual_node

NS = "default"


def deployment(name: str, node: str, replicas: int, *, external: bool) -> dict[str, Any]:
    manifest = inference_deployment(name, node, replicas)
    template = manifest["spec"]["template"]
    template["metadata"]["labels"] = {"app": "infer", "side": name}
    manifest["spec"]["selector"]["matchLabels"] = {"app": "infer", "side": name}
    template["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    if external:
        template["metadata"]["annotations"] = {"vkprovider.io/providers": "routed"}
    else:
        template["spec"]["nodeSelector"] = dict([GPU_POOL_SELECTOR.split("=")])
    return manifest


async def ready_times(kube: KubeClient, side: str) -> dict[str, float]:
    """pod UID → when it was first seen Ready (polled every 20 ms by the bench)."""
    pods = await kube.request("GET", f"/api/v1/namespaces/{NS}/pods", query={"labelSelector": f"side={side}"})
    now = time.monotonic()
    return {
        p["metadata"]["uid"]: now
        for p in pods["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    }


async def main(rate: float, duration: float, round_trip: float) -> None:
    reason = why_unavailable()
    if reason:
        print(f"skipped: {reason}")
        return
    cluster = await Cluster.start(f"bench-dp-{os.getpid()}", gpu_nodes=2, datapath=True)
    assert cluster.datapath is not None
    net = cluster.datapath
    config = cloud_config("routed", 1.0).model_copy(
        update={"ip_range": provider_range(0), "serve_netns": net.backends}
    )
    config = config.model_copy(
        update={"knobs": config.knobs.model_copy(update={"round_trip_seconds": round_trip})}
    )
    net.route(provider_range(0))
    vnode = await start_virtual_node(cluster, {"routed": config})
    kube = vnode.kube
    assert kube is not None
    try:
        service = {
            "metadata": {"name": "infer"},
            "spec": {"selector": {"app": "infer"}, "ports": [{"port": 80, "targetPort": "http"}]},
        }
        ip = (await kube.request("POST", f"/api/v1/namespaces/{NS}/services", body=service))["spec"][
            "clusterIP"
        ]
        for manifest in (
            deployment("home", "", 2, external=False),
            deployment("away", vnode.name, 2, external=True),
        ):
            await kube.request("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", body=manifest)

        # (1) Ready → answered through the ClusterIP, per external replica
        store = vnode.clouds["routed"].store
        ready: dict[str, float] = {}
        answered: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while len(answered) < 2 and time.monotonic() < deadline:
            for uid, at in (await ready_times(kube, "away")).items():
                ready.setdefault(uid, at)
            if ready:
                probe = await run_load(net.node, ip, 80, rate=200, duration=0.1)
                by_id = {d.provider_id: d.uid for d in store.deployments.values()}
                for key in probe.answered_by:
                    uid = by_id.get(key.split("/", 1)[1]) if key.startswith("routed/") else None
                    if uid and uid in ready:
                        answered.setdefault(uid, time.monotonic())
            await asyncio.sleep(0.02)
        gaps = sorted(answered[u] - ready[u] for u in answered)
        print(f"pod Ready -> first answer through the ClusterIP (ms): {[round(g * 1000) for g in gaps]}")

        # (2) steady load
        started = time.process_time()
        report = await run_load(net.node, ip, 80, rate=rate, duration=duration)
        cpu = time.process_time() - started
        print(
            f"steady load, {rate:g} req/s for {duration:g} s (provider round trip {round_trip * 1000:g} ms):"
        )
        print(json.dumps(report.to_json(), indent=2))
        print(f"load generator CPU: {cpu:.2f} s for {report.requests} requests")
    finally:
        await vnode.stop()
        await cluster.stop(remove=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--round-trip", type=float, default=0.02)
    args = parser.parse_args()
    asyncio.run(main(args.rate, args.duration, args.round_trip))
