"""The floor for bench_pods.py (``--service floor``): the least any virtual kubelet must do per pod.

Not the product. A comparison point measured in the same run, on the same apiserver and the same
client stack as the service (``KubeClient`` over the lean keep-alive pool, TLS, the same event
loop), so that "the service's CPU per pod" can be read against "the CPU per pod of doing nothing
but the API work a virtual kubelet cannot skip":

* up: decode the watch event of the bound pod, write Running + Ready (one merge patch of
  ``pods/status`` carrying the resourceVersion), post one Event; decode the echo of that write;
* down: decode the event that shows the deletionTimestamp, post one Event, delete the pod for
  good (grace 0, UID precondition); decode the echo and the DELETED event.

No cache, no queue, no provider, no placement, no translation, no checks: every pod gets the
same status. Same line protocol as ``pods_service.py`` (``stats``, ``quit``), so bench_pods.py
measures it exactly as it measures the service. The difference between the two is what the
service's own logic costs on top of its I/O (bench/README.md, *the floor*).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from bench_pods import write_running
from pods_service import CollectorMeter, process_stats

from vkprovider import eventloop
from vkprovider.kube.client import KubeClient


def event(pod: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    meta = pod["metadata"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": "floor"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class Floor:
    def __init__(self, kube: KubeClient, node: str, workers: int) -> None:
        self.kube = kube
        self.node = node
        self.slots = asyncio.Semaphore(workers)
        self.started: set[str] = set()
        self.deleting: set[str] = set()
        self.in_flight: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        path = "/api/v1/pods"
        selector = f"spec.nodeName={self.node}"
        listed = await self.kube.request("GET", path, query={"fieldSelector": selector})
        version = listed["metadata"]["resourceVersion"]
        while True:
            query = {"fieldSelector": selector, "resourceVersion": version, "allowWatchBookmarks": "true"}
            async for change in self.kube.stream(path, query=query):
                pod = change["object"]
                version = pod["metadata"]["resourceVersion"]
                if change["type"] in ("ADDED", "MODIFIED"):
                    self.on_pod(pod)

    def on_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):
            if uid not in self.deleting:
                self.deleting.add(uid)
                self.spawn(self.delete(pod))
        elif uid not in self.started and (pod.get("status") or {}).get("phase") != "Running":
            self.started.add(uid)
            self.spawn(self.start(pod))

    def spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def start(self, pod: dict[str, Any]) -> None:
        async with self.slots:
            await write_running(self.kube, pod)
            await self.post_event(pod, "Started", "Running")

    async def delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        async with self.slots:
            await self.post_event(pod, "Killing", "Stopping")
            await self.kube.request(
                "DELETE",
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
                decode=False,
            )

    async def post_event(self, pod: dict[str, Any], reason: str, message: str) -> None:
        namespace = pod["metadata"]["namespace"]
        await self.kube.request(
            "POST", f"/api/v1/namespaces/{namespace}/events", body=event(pod, reason, message), decode=False
        )


async def serve(args: argparse.Namespace) -> None:
    kube = await KubeClient.connect(args.kubeconfig, qps=args.kube_qps, burst=int(2 * args.kube_qps))
    # The node object only: pods bound to a node that does not exist are garbage-collected.
    await kube.request("POST", "/api/v1/nodes", body={"metadata": {"name": args.node}})
    floor = Floor(kube, args.node, args.workers)
    watcher = asyncio.create_task(floor.run())
    collector = CollectorMeter()
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(
        json.dumps({"ready": True, "provider_url": None, "loop": eventloop.running_loop_name()}), flush=True
    )
    while line := (await reader.readline()).decode().strip():
        if line == "stats":
            stats = {
                **process_stats(kube),
                "events_dropped": 0,
                "events_queued": len(floor.in_flight),
                "cached_pods": len(floor.started - floor.deleting),
                "provider_cpu_s": None,
                "gc": collector.stats(),
            }
            print(json.dumps(stats), flush=True)
        elif line == "quit":
            break
    watcher.cancel()
    await asyncio.gather(watcher, *floor.in_flight, return_exceptions=True)
    await kube.request("DELETE", f"/api/v1/nodes/{args.node}", decode=False)
    await kube.close()
    print(json.dumps({"stopped": True}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--kube-qps", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--event-loop", choices=eventloop.CHOICES, default="auto")
    args, _ = parser.parse_known_args()  # the service's other options mean nothing here
    eventloop.run(serve(args), args.event_loop)


if __name__ == "__main__":
    main()
