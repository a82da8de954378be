"""The informer's own CPU per watch event of a pod: JSON decode + ``_lean`` (managedFields
dropped, strings shared, unchanged parts taken from the previous version). Prints figures;
asserts nothing.

The events are a real apiserver's (``data/pod_watch_events.jsonl``: the watch of one pod the
way bench_pods.py makes it: created bound, its status written once, deleted gracefully, then
with grace 0; ``--capture`` writes them anew from a dev cluster). Each variant decodes and
leans the four cached events in order (ADDED, then three MODIFIED), each with and without the
previous version, interleaved in rounds so the machine's load weighs on all alike; the figure
is the median of the rounds (and their minimum).

    .venv/bin/python bench/bench_informer_lean.py
    .venv/bin/python bench/bench_informer_lean.py --capture   # needs the control-plane binaries
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

from vkprovider.kube.informer import _lean

DATA = Path(__file__).with_name("data") / "pod_watch_events.jsonl"


def cached_events(data: Path) -> list[bytes]:
    """The watch lines the informer caches (every type but DELETED), in order."""
    lines = data.read_bytes().splitlines()
    return [line for line in lines if json.loads(line)["type"] != "DELETED"]


def run_chain(lines: list[bytes], reuse: bool) -> None:
    previous = None
    for line in lines:
        obj = json.loads(line)["object"]
        previous = _lean(obj, previous if reuse else None)


def measure(data: Path, rounds: int, repeat: int) -> None:
    lines = cached_events(data)
    variants = {"full walk (before)": False, "with the previous version (after)": True}
    figures: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, reuse in variants.items():
            started = time.process_time()
            for _ in range(repeat):
                run_chain(lines, reuse)
            figures[name].append(1e6 * (time.process_time() - started) / repeat / len(lines))
    print(
        f"{len(lines)} cached watch events of one pod, {rounds} rounds of {repeat}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'decode + lean':36} {'median us/event':>16} {'min':>8}")
    for name, values in figures.items():
        print(f"{name:36} {statistics.median(values):16.1f} {min(values):8.1f}")


async def capture() -> bytes:
    """The watch lines anew: one pod through the path bench_pods.py takes, as the watch sees it."""
    from bench_pods import pod, running_status

    from vkprovider.devcluster import Cluster
    from vkprovider.kube.client import MERGE_PATCH, KubeClient

    cluster = await Cluster.start(f"bench-lean-{os.getpid()}", gpu_nodes=0)
    try:
        kube = await KubeClient.connect(str(cluster.kubeconfig), qps=1000, burst=1000)
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "bench"}})
        lines: list[bytes] = []

        async def watch() -> None:
            query = {"fieldSelector": "spec.nodeName=vk-capture"}
            resp = await kube._send("GET", "/api/v1/pods", query={**query, "watch": "true"}, timeout=60)
            while line := await resp.content.readline():
                lines.append(line)

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(1.0)
        path = "/api/v1/namespaces/bench/pods"
        created = await kube.request("POST", path, body=pod("p-1", "vk-capture", "capture"))
        await asyncio.sleep(0.5)
        annotations = {"vkprovider.io/provider": "mem", "vkprovider.io/offer": "mem-h100"}
        meta = {"annotations": annotations, "resourceVersion": created["metadata"]["resourceVersion"]}
        body = {"metadata": meta, "status": running_status(created)}
        await kube.request("PATCH", f"{path}/p-1/status", body=body, content_type=MERGE_PATCH)
        for grace in (30, 0):
            await asyncio.sleep(0.5)
            await kube.request("DELETE", f"{path}/p-1", body={"gracePeriodSeconds": grace})
        await asyncio.sleep(1.0)
        watcher.cancel()
        await kube.close()
        return b"".join(lines)
    finally:
        await cluster.stop(remove=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--capture", action="store_true", help="write the events anew from a dev cluster")
    parser.add_argument(
        "--data", type=Path, default=DATA, help="the events file (read, or written by --capture)"
    )
    args = parser.parse_args()
    if args.capture:
        captured = asyncio.run(capture())
        args.data.write_bytes(captured)
        print(f"{len(captured.splitlines())} watch events written to {args.data}")
    else:
        measure(args.data, args.rounds, args.repeat)


if __name__ == "__main__":
    main()
