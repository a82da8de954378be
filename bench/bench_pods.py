"""Pod throughput: N pods bound to the virtual node -> Running+Ready -> gracefully deleted.

Real control plane. The service (node agent, placer, pod controller; ``pods_service.py``) runs
in a process of its own, so the CPU time and RSS it reports are its own; its provider is the
reference memory adapter in ``run_at_once`` mode (the service alone) or fakecloud at zero latency
(a server in a process of its own, whose CPU is printed apart).
In the same run, on the same apiserver, a raw client doing only create + one status write per
pod measures the ceiling the service is compared with. Per-pod latencies are taken on this
process's clock from a watch (create sent -> Ready=True; delete sent -> gone). The apiserver's
own ``apiserver_request_total`` is printed before/after. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_pods.py --pods 1000                     # raised limits (default)
    .venv/bin/python bench/bench_pods.py --pods 200 --kube-qps 50 --provider-rate 10 --queue-rate 100
    .venv/bin/python bench/bench_pods.py --pods 1000 --profile /tmp/pods.prof   # cProfile the service
    .venv/bin/python bench/bench_pods.py --pods 10000 --idle-seconds 60 --raw-pods 2000  # bench_10k.py
    .venv/bin/python bench/bench_pods.py --pods 1000 --service floor   # the least any virtual kubelet does

Above 2,000 pods the control plane gets ``ControlPlaneSize.large()`` (devcluster/sizing.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from vkprovider import eventloop
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.sizing import ControlPlaneSize
from vkprovider.kube.client import MERGE_PATCH, KubeClient

NAMESPACE = "bench"
#: what serves the virtual node: the product, or the floor it is compared with (floor_service.py)
SERVICES = {"vkprovider": "pods_service.py", "floor": "floor_service.py"}
CONCURRENCY = 32  #: creates (and raw writes) in flight at once
_METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def pod(name: str, node: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": label}},
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


def running_status(created: dict[str, Any]) -> dict[str, Any]:
    """What a kubelet writes once: Running, ready, the four conditions, one container running."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "10.128.0.1",
        "startTime": now,
        "conditions": conditions,
        "containerStatuses": [
            {
                "name": "server",
                "image": "registry.example/llm:1",
                "imageID": "",
                "containerID": "raw://server",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
        ],
    }


async def write_running(kube: KubeClient, pod: dict[str, Any]) -> None:
    """``running_status`` in one merge patch of ``pods/status``, guarded by the resourceVersion
    ``pod`` carries (the write a kubelet makes once its containers run)."""
    meta = pod["metadata"]
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
        body={"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": running_status(pod)},
        content_type=MERGE_PATCH,
        decode=False,
    )


# ---------------------------------------------------------------------- apiserver metrics


async def request_counts(cluster: Cluster) -> Counter[tuple[str, str, str]]:
    """``apiserver_request_total`` summed by (verb, resource[/subresource], code)."""
    async with cluster.http() as http:
        text = (await http.get("/metrics")).text
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        match = _METRIC.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        resource = labels.get("resource", "") + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        counts[labels.get("verb", ""), resource, labels.get("code", "")] += int(float(match["value"]))
    return counts


def provider_cpu_rows(
    s0: dict[str, Any], s1: dict[str, Any], s2: dict[str, Any], s3: dict[str, Any], pods: int
) -> list[tuple[str, str]]:
    """The fakecloud server's own CPU (its process), up and down; nothing for the memory adapter."""
    if s0.get("provider_cpu_s") is None:
        return []
    up = 1000 * (s1["provider_cpu_s"] - s0["provider_cpu_s"]) / pods
    down = 1000 * (s3["provider_cpu_s"] - s2["provider_cpu_s"]) / pods
    return [("fakecloud server CPU ms per pod up / down (own process)", f"{up:.2f} / {down:.2f}")]


def gc_collections(s0: dict[str, Any], s1: dict[str, Any], s2: dict[str, Any], s3: dict[str, Any]) -> str:
    """Collections per generation during the way up and the way down (``CollectorMeter``)."""

    def delta(a: dict[str, Any], b: dict[str, Any]) -> str:
        return "/".join(
            str(y - x) for x, y in zip(a["gc"]["collections"], b["gc"]["collections"], strict=True)
        )

    return f"{delta(s0, s1)} / {delta(s2, s3)}"


def gc_cost(s0: dict[str, Any], s1: dict[str, Any], s2: dict[str, Any], s3: dict[str, Any], pods: int) -> str:
    up = 1000 * (s1["gc"]["cpu_s"] - s0["gc"]["cpu_s"]) / pods
    down = 1000 * (s3["gc"]["cpu_s"] - s2["gc"]["cpu_s"]) / pods
    freed = (s1["gc"]["collected"] - s0["gc"]["collected"], s3["gc"]["collected"] - s2["gc"]["collected"])
    return f"{up:.3f} / {down:.3f} ({freed[0]} / {freed[1]})"


def print_counts(title: str, counts: Counter[tuple[str, str, str]], pods: int) -> None:
    print(f"{title}")
    rows = [(k, v) for k, v in sorted(counts.items()) if v > 0 and k[1].split("/")[0] in ("pods", "events")]
    for (verb, resource, code), value in rows:
        print(f"  {verb:<7} {resource:<14} {code}  {value:>7}  ({value / pods:.2f}/pod)")
    conflicts = sum(v for (_, _, code), v in counts.items() if code == "409")
    print(f"  409 Conflict, any resource: {conflicts}")


# ---------------------------------------------------------------------- the service process


class Service:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.provider_url: str | None = None  #: the fakecloud's URL (None: memory adapter)
        self.loop = "?"  #: the event loop the service runs on

    @classmethod
    async def start(cls, cluster: Cluster, node: str, args: argparse.Namespace) -> Service:
        command = [
            sys.executable,
            str(Path(__file__).with_name(SERVICES[args.service])),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--node={node}",
            f"--provider={args.provider}",
            f"--kube-qps={args.kube_qps}",
            f"--provider-rate={args.provider_rate}",
            f"--workers={args.workers}",
            f"--queue-rate={args.queue_rate}",
            f"--event-loop={args.event_loop}",
        ]
        if args.profile:
            command.append(f"--profile={args.profile}")
        if args.status_before_delete:
            command.append("--status-before-delete")
        command.append(f"--max-pods={max(10_000, args.pods)}")
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        service = cls(proc)
        ready = await service._reply()
        service.provider_url = ready.get("provider_url")
        service.loop = ready.get("loop", "?")
        return service

    async def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(120):
            line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the service process exited ({await self.proc.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def send(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()
        return await self._reply()

    async def settled(self, timeout: float = 300.0) -> dict[str, Any]:
        """Stats once the background Events are all written (a pod's cost includes them)."""
        async with asyncio.timeout(timeout):
            while (await self.send("stats"))["events_queued"]:
                await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # the last ones in flight
        return await self.send("stats")

    async def provider_requests(self) -> Counter[str]:
        """The fakecloud's own count of API requests served, by ``METHOD /route`` (empty with the
        memory adapter), read from its ``/admin/stats`` by the bench, not by the service."""
        if self.provider_url is None:
            return Counter()
        async with httpx.AsyncClient(base_url=self.provider_url) as http:
            counts: dict[str, int] = (await http.get("/admin/stats")).json()["requests"]
        return Counter({k: v for k, v in counts.items() if k.startswith(("GET", "POST", "PUT", "DELETE"))})

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(Exception):
                await self.send("quit")
                await self._reply()
            if self.proc.returncode is None:
                self.proc.terminate()
        await self.proc.wait()


# ---------------------------------------------------------------------- watching pods


class Watch:
    """Client-clock times at which each pod first showed Ready=True, and was gone."""

    def __init__(self, admin: KubeClient, label: str) -> None:
        self.ready: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        self.failed: set[str] = set()
        self._admin, self._label = admin, label
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        body = await self._admin.request(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query={"labelSelector": f"bench={self._label}"}
        )
        self._task = asyncio.create_task(self._run(body["metadata"]["resourceVersion"]))

    async def _run(self, version: str) -> None:
        while True:  # the stream ends on its timeout: resume from the last version seen
            query = {
                "labelSelector": f"bench={self._label}",
                "resourceVersion": version,
                "timeoutSeconds": 240,
            }
            async for event in self._admin.stream(f"/api/v1/namespaces/{NAMESPACE}/pods", query=query):
                version = event["object"]["metadata"].get("resourceVersion") or version
                self._see(event)

    def _see(self, event: dict[str, Any]) -> None:
        obj, now = event["object"], time.perf_counter()
        name = obj["metadata"]["name"]
        if event["type"] == "DELETED":
            self.gone.setdefault(name, now)
            return
        status = obj.get("status") or {}
        if status.get("phase") == "Failed":
            self.failed.add(name)
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if ready:
            self.ready.setdefault(name, now)

    async def until(self, done: Any, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not done():
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


# ---------------------------------------------------------------------- phases


async def create_all(admin: KubeClient, names: list[str], node: str, label: str) -> dict[str, float]:
    sent: dict[str, float] = {}
    limit = asyncio.Semaphore(CONCURRENCY)

    async def create(name: str) -> None:
        async with limit:
            sent[name] = time.perf_counter()
            await admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(name, node, label))

    await asyncio.gather(*(create(name) for name in names))
    return sent


async def delete_all(admin: KubeClient, names: list[str]) -> dict[str, float]:
    """A graceful delete per pod (its default 30s grace), as a Deployment scale-down sends them."""
    sent: dict[str, float] = {}
    limit = asyncio.Semaphore(CONCURRENCY)

    async def delete(name: str) -> None:
        async with limit:
            sent[name] = time.perf_counter()
            await admin.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")

    await asyncio.gather(*(delete(name) for name in names))
    return sent


async def raw_ceiling(admin: KubeClient, pods: int) -> float:
    """Pods/s of a raw client doing create + one status write per pod (the apiserver's ceiling)."""
    node = f"raw-{uuid.uuid4().hex[:6]}"
    await admin.request("POST", "/api/v1/nodes", body={"metadata": {"name": node}})
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with limit:
            created = await admin.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(f"raw-{i:05d}", node, "raw")
            )
            await write_running(admin, created)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(pods)))
    rate = pods / (time.perf_counter() - started)
    await admin.request(
        "DELETE",
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        query={"labelSelector": "bench=raw"},
        body={"gracePeriodSeconds": 0},
        timeout=600,
    )
    await admin.request("DELETE", f"/api/v1/nodes/{node}")
    return rate


async def raw_drain(admin: KubeClient, pods: int) -> float:
    """Pods/s of a raw client doing what a graceful deletion asks of the apiserver, no more: the
    graceful DELETE (as the bench sends it), one Event and the final DELETE (grace 0, UID
    precondition), pod after pod, 32 at once. The drain ceiling on this machine at this moment."""
    node = f"rawd-{uuid.uuid4().hex[:6]}"
    await admin.request("POST", "/api/v1/nodes", body={"metadata": {"name": node}})
    limit = asyncio.Semaphore(CONCURRENCY)
    uids: dict[str, str] = {}

    async def create(i: int) -> None:
        async with limit:
            created = await admin.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(f"rawd-{i:05d}", node, "rawd")
            )
            uids[created["metadata"]["name"]] = created["metadata"]["uid"]

    async def drain(name: str) -> None:
        async with limit:
            path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
            await admin.request("DELETE", path, decode=False)
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            event = {
                "metadata": {"generateName": f"{name}."},
                "involvedObject": {"kind": "Pod", "namespace": NAMESPACE, "name": name, "uid": uids[name]},
                "reason": "ProviderDeleteSuccess",
                "message": "deleted the deployment",
                "type": "Normal",
                "source": {"component": "raw"},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            await admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/events", body=event, decode=False)
            final = {"gracePeriodSeconds": 0, "preconditions": {"uid": uids[name]}}
            await admin.request("DELETE", path, body=final, decode=False)

    await asyncio.gather(*(create(i) for i in range(pods)))
    started = time.perf_counter()
    await asyncio.gather(*(drain(name) for name in list(uids)))
    rate = pods / (time.perf_counter() - started)
    await admin.request("DELETE", f"/api/v1/nodes/{node}")
    return rate


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def provider_rows(before: Counter[str], after: Counter[str], pods: int) -> str:
    """Provider requests per pod by route, e.g. ``POST /v1/deployments 1.00``."""
    diff = after - before
    total = sum(diff.values())
    shown = ", ".join(f"{k} {v / pods:.2f}" for k, v in sorted(diff.items()))
    return f"{total / pods:.2f}: {shown or 'none'}"


def per_pod_calls(before: dict[str, int], after: dict[str, int], pods: int) -> str:
    diff = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    shown = [
        f"{k} {v / pods:.2f}"
        for k, v in sorted(diff.items())
        if v and not k.startswith(("WATCH", "GET leases", "PUT leases"))
    ]
    return ", ".join(shown) or "none"


async def run(args: argparse.Namespace) -> None:
    pods = args.pods
    large = pods > 2000
    # One cluster per run: a fixed name would stop another session's bench mid-run (start()
    # stops whatever cluster the name's run directory holds).
    name = f"bench-pods-{os.getpid()}"
    cluster = await Cluster.start(name, gpu_nodes=0, size=ControlPlaneSize.large() if large else None)
    raw_pods = args.raw_pods or pods
    admin = await KubeClient.connect(str(cluster.kubeconfig), qps=100_000, burst=100_000)
    service: Service | None = None
    watch: Watch | None = None
    try:
        await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        raw = await raw_ceiling(admin, raw_pods)
        node = f"vk-bench-{uuid.uuid4().hex[:6]}"
        service = await Service.start(cluster, node, args)
        await asyncio.sleep(2.0)  # let the node agent's first writes settle
        idle0, idle_t0 = await service.send("stats"), time.perf_counter()
        await asyncio.sleep(args.idle_seconds)
        idle1, idle_t1 = await service.send("stats"), time.perf_counter()
        idle_cores = (idle1["cpu_s"] - idle0["cpu_s"]) / (idle_t1 - idle_t0)

        watch = Watch(admin, "pods")
        await watch.start()
        names = [f"p-{i:05d}" for i in range(pods)]
        if args.profile:
            await service.send("profile")
        metrics0 = await request_counts(cluster)
        p0 = await service.provider_requests()
        s0 = await service.send("stats")
        started = time.perf_counter()
        sent = await create_all(admin, names, node, "pods")
        await watch.until(lambda: len(watch.ready) + len(watch.failed) >= pods, args.timeout)
        up_s = max(watch.ready.values(), default=started) - started
        # A pod's cost up includes what it left queued (background Events): count once settled.
        s1 = await service.settled()
        metrics1 = await request_counts(cluster)
        p1 = await service.provider_requests()
        s1b, t1b = await service.send("stats"), time.perf_counter()
        await asyncio.sleep(args.steady_seconds or args.idle_seconds)  # all Running: the cost now?
        s1c, t1c = await service.send("stats"), time.perf_counter()
        running_cores = (s1c["cpu_s"] - s1b["cpu_s"]) / (t1c - t1b)

        s2 = await service.send("stats")
        metrics2 = await request_counts(cluster)
        p2 = await service.provider_requests()
        deleting = time.perf_counter()
        delete_sent = await delete_all(admin, names)
        await watch.until(lambda: len(watch.gone) >= pods, args.timeout)
        down_s = max(watch.gone.values()) - deleting
        s3 = await service.settled()  # the Events still queued are written
        metrics3 = await request_counts(cluster)
        p3 = await service.provider_requests()
        raw_after = await raw_ceiling(admin, raw_pods)  # the machine is shared: take both ends
        raw = (raw + raw_after) / 2
        drain = await raw_drain(admin, raw_pods)

        up_ms = [1000 * (watch.ready[n] - sent[n]) for n in names if n in watch.ready]
        down_ms = [1000 * (watch.gone[n] - delete_sent[n]) for n in names if n in watch.gone]
        up_rate, down_rate = pods / up_s, pods / down_s
        up_calls = sum(s1["calls"].values()) - sum(s0["calls"].values())
        down_calls = sum(s3["calls"].values()) - sum(s2["calls"].values())
        print(
            f"pods {pods}, service {args.service}, provider {args.provider}, workers {args.workers}, kube QPS {args.kube_qps:g} "
            f"(burst {int(2 * args.kube_qps)}), provider rate {args.provider_rate:g}/s, "
            f"queue rate {args.queue_rate:g}/s, status before delete {args.status_before_delete}, "
            f"failed {len(watch.failed)}, Events dropped {s3.get('events_dropped')}, "
            f"control plane {'large' if large else 'default'} {ControlPlaneSize.large() if large else ''}"
        )
        print_counts(
            "apiserver requests, pods and events, bound -> Running+Ready (bench's creates included):",
            metrics1 - metrics0,
            pods,
        )
        print_counts(
            "apiserver requests, pods and events, graceful deletion (bench's deletes included):",
            metrics3 - metrics2,
            pods,
        )
        rows = [
            ("pods", f"{pods}"),
            ("pods/s up (bound -> Running+Ready)", f"{up_rate:.1f}"),
            ("pods/s down (delete -> gone)", f"{down_rate:.1f}"),
            (
                "per pod up p50 / p99 (ms, client clock)",
                f"{percentile(up_ms, 0.5):.0f} / {percentile(up_ms, 0.99):.0f}",
            ),
            (
                "per pod down p50 / p99 (ms)",
                f"{percentile(down_ms, 0.5):.0f} / {percentile(down_ms, 0.99):.0f}",
            ),
            (
                "API requests per pod up",
                f"{up_calls / pods:.2f}: {per_pod_calls(s0['calls'], s1['calls'], pods)}",
            ),
            (
                "API requests per pod down",
                f"{down_calls / pods:.2f}: {per_pod_calls(s2['calls'], s3['calls'], pods)}",
            ),
            *(
                [
                    ("provider requests per pod up", provider_rows(p0, p1, pods)),
                    ("provider requests per pod down", provider_rows(p2, p3, pods)),
                ]
                if service.provider_url
                else []
            ),
            ("service event loop", service.loop),
            (
                "API connections opened up / down (keep-alive pool)",
                f"{s1['connections_opened'] - s0['connections_opened']}"
                f" / {s3['connections_opened'] - s2['connections_opened']}",
            ),
            (
                "service CPU ms per pod up / down",
                f"{1000 * (s1['cpu_s'] - s0['cpu_s']) / pods:.2f} / {1000 * (s3['cpu_s'] - s2['cpu_s']) / pods:.2f}",
            ),
            (
                "  of it in the kernel (system time), up / down",
                f"{1000 * (s1['sys_s'] - s0['sys_s']) / pods:.2f} / {1000 * (s3['sys_s'] - s2['sys_s']) / pods:.2f}",
            ),
            ("service cyclic GC up / down: collections young/middle/full", gc_collections(s0, s1, s2, s3)),
            ("  its CPU ms per pod, up / down (objects it freed)", gc_cost(s0, s1, s2, s3, pods)),
            ("service CPU idle, 0 pods / all Running (cores)", f"{idle_cores:.3f} / {running_cores:.3f}"),
            *provider_cpu_rows(s0, s1, s2, s3, pods),
            (
                "service RSS, all Running / peak (MiB)",
                f"{s1c['rss_kb'] / 1024:.0f} ({s1c['cached_pods']} pods cached) / {s3['peak_rss_kb'] / 1024:.0f}",
            ),
            (
                "raw-client ceiling (create + 1 status write, pods/s)",
                f"{raw:.1f} (mean of before and after, {raw_pods} pods each)",
            ),
            ("ratio up / ceiling", f"{up_rate / raw:.0%}"),
            ("raw drain ceiling (graceful DELETE + Event + DELETE, pods/s)", f"{drain:.1f}"),
            ("ratio down / drain ceiling", f"{down_rate / drain:.0%}"),
        ]
        width = max(len(k) for k, _ in rows)
        print("-" * (width + 40))
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
        print("-" * (width + 40))
        if watch.failed:
            print(f"failed pods: {sorted(watch.failed)[:5]}")
        if up_ms:
            print(f"(mean up latency {statistics.fmean(up_ms):.0f} ms)")
    finally:
        if watch is not None:
            await watch.stop()
        if service is not None:
            await service.stop()
        await admin.close()
        await cluster.stop(remove=True)
    if args.profile:
        print(f"service profile written to {args.profile} (python -m pstats {args.profile})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--provider", choices=("memory", "fakecloud"), default="memory")
    parser.add_argument(
        "--service",
        choices=tuple(SERVICES),
        default="vkprovider",
        help="floor: only the API work any virtual kubelet must do per pod (floor_service.py), to compare",
    )
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument(
        "--kube-qps", type=float, default=1000.0, help="service API client QPS (config default 50)"
    )
    parser.add_argument(
        "--provider-rate", type=float, default=1000.0, help="client-side deploys/s (config default 10)"
    )
    parser.add_argument(
        "--queue-rate", type=float, default=100.0, help="pod queue's global rate (controller default 100)"
    )
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="how long idle CPU is measured")
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=0.0,
        help="idle CPU with every pod Running (default: --idle-seconds)",
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--status-before-delete",
        action="store_true",
        help="pods.status_before_delete: terminated states written before every delete (kubelet-like)",
    )
    parser.add_argument("--raw-pods", type=int, default=0, help="pods of the raw ceiling (default: --pods)")
    parser.add_argument("--profile", default="", help="cProfile the service's measured part into this file")
    parser.add_argument("--event-loop", choices=eventloop.CHOICES, default="auto", help="the service's loop")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
