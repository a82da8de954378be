"""The service under test for bench_pods.py, in a process of its own so its CPU time is its own.

Runs the real node agent, placer and pod controller for one virtual node against the bench's
control plane, with one provider: the reference memory adapter in ``run_at_once`` mode, in
process (the service alone, no provider latency), or fakecloud at zero latency, a server in a
process of its own whose CPU is reported apart (the adapter's is the service's). Talks to
the bench over stdin/stdout, one JSON line per command:

    (first line) -> {"ready": true, "provider_url": the fakecloud's URL, or None}
    stats   -> {"cpu_s": user+system CPU seconds, "rss_kb", "peak_rss_kb", "calls": {"VERB kind": n},
                "provider_cpu_s": the fakecloud process's CPU seconds (None with the memory adapter)}
    quit    -> stops (writing the cProfile stats first when --profile is given)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vkprovider import eventloop
from vkprovider.config import NodeConfig
from vkprovider.kube.client import KubeClient
from vkprovider.node.agent import NodeAgent
from vkprovider.placement import PlacementConfig, Placer
from vkprovider.placement.config import RateLimitConfig
from vkprovider.plugins.guard import guard
from vkprovider.plugins.registry import instantiate
from vkprovider.pods.controller import PodController

#: the fakecloud run: one offer with room for every pod, Running and serving at once
FAKECLOUD = {
    "provider": "mem",
    "seed": 7,
    "catalog": [
        {
            "id": "mem-h100",
            "gpu_type": "H100-SXM-80GB",
            "gpu_count": 1,
            "region": "eu-west",
            "price_per_hour": 1.0,
            "capacity": 1_000_000,
        }
    ],
    "lifecycle": {"provisioning_seconds": 0, "serving_after_seconds": 0},
}
OFFER = {
    "provider": "mem",
    "offer_id": "mem-h100",
    "gpu_type": "H100-SXM-80GB",
    "gpu_count": 1,
    "region": "eu-west",
    "price_per_hour": 1.0,
    "capacity": 1_000_000,
}


class FakeCloud:
    """fakecloud at zero latency in a process of its own (``vkprovider fakecloud``): the cloud's
    CPU (its app, its watch loop re-reading every deployment each 0.1 s) is not the service's,
    so it is reported apart (``provider_cpu_s``). Until 2026-12-04 it ran inside the service's
    process and its CPU was counted as the service's."""

    def __init__(self, process: asyncio.subprocess.Process, url: str, directory: str) -> None:
        self.process, self.url, self._directory = process, url, directory

    @classmethod
    async def start(cls) -> FakeCloud:
        directory = tempfile.mkdtemp(prefix="bench-fakecloud-")
        config = _write(Path(directory, "fakecloud.yaml"), json.dumps(FAKECLOUD))  # JSON is YAML
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vkprovider", "fakecloud", "--port", "0", "--config", str(config),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert process.stdout is not None
        line = (await process.stdout.readline()).decode().strip()
        if not line.startswith("fakecloud listening on "):
            process.kill()
            raise RuntimeError(f"fakecloud did not start: {line!r}")
        return cls(process, line.rsplit(" ", 1)[1], directory)

    def cpu_s(self) -> float:
        """user + system CPU seconds of the fakecloud process (/proc/PID/stat)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def stop(self) -> None:
        self.process.terminate()
        await self.process.wait()
        shutil.rmtree(self._directory, ignore_errors=True)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def rss_kb() -> tuple[int, int]:
    """(current, peak) resident set size of this process, from /proc (kB)."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def calls_by_kind(kube: KubeClient) -> dict[str, int]:
    return {f"{verb} {kind}": n for (verb, kind), n in sorted(kube.calls_by.items())}


def process_stats(kube: KubeClient) -> dict[str, Any]:
    """This process's CPU (user + system, and system apart: sockets, loopback delivery
    included), RSS now and at peak, and its API calls by verb and resource."""
    times = os.times()
    rss, peak = rss_kb()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_s": times.user + times.system,
        "sys_s": times.system,
        "rss_kb": rss,
        "peak_rss_kb": max(peak, usage.ru_maxrss),
        "calls": calls_by_kind(kube),
        "connections_opened": kube.connections_opened,
    }


async def serve(args: argparse.Namespace) -> None:
    kube = await KubeClient.connect(args.kubeconfig, qps=args.kube_qps, burst=int(2 * args.kube_qps))
    if args.provider == "memory":
        settings: dict[str, Any] = {"offers": [OFFER], "run_at_once": True}
        providers = {"mem": guard(instantiate("vkprovider.plugins.memory:InMemoryProvider", "mem", settings))}
        server = None
    else:
        server = await FakeCloud.start()
        providers = {"mem": guard(instantiate("fakecloud", "mem", {"url": server.url}))}
    rate = RateLimitConfig(per_second=args.provider_rate, burst=max(1, int(args.provider_rate)))
    placer = Placer(providers, PlacementConfig(rate_limit=rate))
    await placer.refresh()
    # The local control plane's node-monitor-grace-period is 10s: renew well within it.
    node_config = NodeConfig(
        name=args.node, lease_renew_seconds=2.0, status_update_seconds=60.0, max_pods=args.max_pods
    )
    controllers: list[PodController] = []
    agent = NodeAgent(
        kube,
        node_config,
        providers,
        placer,
        pods=lambda: list(controllers[0].informer.cache.values()) if controllers else [],
    )
    await agent.register()
    controller = PodController(
        kube,
        providers,
        placer,
        node_name=args.node,
        host_ip="127.0.0.1",
        workers=args.workers,
        queue_rate=args.queue_rate,
        status_before_delete=args.status_before_delete,
    )
    controllers.append(controller)
    tasks = [asyncio.create_task(t) for t in (agent.run(), controller.run(), placer.run())]
    await controller.synced.wait()
    collector = CollectorMeter()
    # CPU time, not wall time: the machine is shared, and waiting is not what we look for.
    profile = cProfile.Profile(time.process_time) if args.profile else None
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    # The bench reads the cloud's own request counts (/admin/stats) itself: not the service's CPU.
    ready = {
        "ready": True,
        "provider_url": server.url if server else None,
        "loop": eventloop.running_loop_name(),
    }
    print(json.dumps(ready), flush=True)
    while line := (await reader.readline()).decode().strip():
        if line == "profile" and profile is not None:
            profile.enable()
            print(json.dumps({"profiling": True}), flush=True)
        elif line == "stats":
            stats = {
                **process_stats(kube),
                "events_dropped": controller.events.dropped,
                # still to be written in the background (the bench counts a pod's cost once settled)
                "events_queued": sum(q.qsize() for q in controller.events._queues),
                "cached_pods": len(controller.informer.cache),
                "provider_cpu_s": server.cpu_s() if server is not None else None,
                "gc": collector.stats(),
            }
            print(json.dumps(stats), flush=True)
        elif line == "quit":
            break
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for provider in providers.values():
        await provider.close()
    if server is not None:
        await server.stop()
    await kube.close()
    print(json.dumps({"stopped": True}), flush=True)


class CollectorMeter:
    """The cyclic garbage collector's work as the service does it: collections per generation,
    their CPU time and the objects they freed (``gc.callbacks``), so a bench shows what the
    collector costs without a profiler's own allocations in the way."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.collected = 0
        self.cpu_s = 0.0
        self._started = 0.0
        gc.callbacks.append(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        self.cpu_s += time.process_time() - self._started
        self.collections[info["generation"]] += 1
        self.collected += info["collected"]

    def stats(self) -> dict[str, Any]:
        return {"collections": list(self.collections), "collected": self.collected, "cpu_s": self.cpu_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--provider", choices=("memory", "fakecloud"), default="memory")
    parser.add_argument("--kube-qps", type=float, default=50.0)
    parser.add_argument("--provider-rate", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--queue-rate", type=float, default=100.0)
    parser.add_argument("--status-before-delete", action="store_true", help="pods.status_before_delete")
    parser.add_argument("--max-pods", type=int, default=10_000, help="the node's capacity pods")
    parser.add_argument("--profile", default="", help="write cProfile stats of the measured part here")
    parser.add_argument("--event-loop", choices=eventloop.CHOICES, default="auto")
    args = parser.parse_args()
    eventloop.run(serve(args), args.event_loop)


if __name__ == "__main__":
    main()
