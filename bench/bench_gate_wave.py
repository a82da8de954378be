"""How long one return-wave plan takes on a large cluster (the gate plans on every tick, ~1 s).

Synthetic caches: ``--nodes`` local GPU nodes of 8 GPUs, ``--pods`` pods bound to them (a few
with required anti-affinity), ``--external`` replicas on the virtual node of which some carry a
hostname spread constraint. Prints the median and worst of ``--runs`` plans:

    .venv/bin/python bench/bench_gate_wave.py --nodes 500 --pods 5000 --external 200
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from vkprovider.gate.config import TaintConfig
from vkprovider.gate.wave import WavePlanner
from vkprovider.gate.wave_config import ReturnHomeConfig

JSON = dict[str, Any]
HOST = "kubernetes.io/hostname"


def node(name: str, gpus: int = 8, virtual: bool = False) -> JSON:
    labels = {HOST: name, **({"type": "virtual-kubelet"} if virtual else {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, on: str, app: str, *, owner: bool = False, spread: bool = False, anti: bool = False
) -> JSON:
    spec: JSON = {
        "nodeName": on,
        "containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}
        ],
    }
    if spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 50,
                "topologyKey": HOST,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    if anti:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "noisy"}}}
                ]
            }
        }
    meta: JSON = {"name": name, "namespace": "ns", "uid": name, "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": app, "uid": app, "controller": True}]
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--external", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    nodes = [node(f"n{i}") for i in range(args.nodes)] + [node("vk", 10**6, virtual=True)]
    pods = [pod(f"p{i}", f"n{i % args.nodes}", f"busy{i % 50}", anti=i % 100 == 0) for i in range(args.pods)]
    pods += [pod(f"x{i}", "vk", f"inf{i % 4}", owner=True, spread=i % 4 == 0) for i in range(args.external)]
    pins = {f"inf{i}": "" for i in range(4)}
    times = []
    for _ in range(args.runs):
        planner = WavePlanner(ReturnHomeConfig(), "vk", TaintConfig())
        started = time.perf_counter()
        plan = planner.plan(nodes, pods, 0.0, pins)
        times.append(time.perf_counter() - started)
    print(
        f"plan over {args.nodes} nodes, {args.pods} local pods, {args.external} external replicas: "
        f"{len(plan.wave)} marked, {len(plan.stay)} stay; "
        f"median {statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
