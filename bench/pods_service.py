"""The service under test for bench_pods.py, in a process of its own so its CPU time is its own.

Runs the real node agent, placer and pod controller for one virtual node against the bench's
control plane, with one in-process provider: the reference memory adapter in ``run_at_once``
mode (the service alone, no provider latency), or a fakecloud server at zero latency. Talks to
the bench over stdin/stdout, one JSON line per command:

    stats   -> {"cpu_s": user+system CPU seconds, "rss_kb", "peak_rss_kb", "calls": {"VERB kind": n}}
    quit    -> stops (writing the cProfile stats first when --profile is given)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import sys
import time
from typing import Any

from vkprovider.config import NodeConfig
from vkprovider.kube.client import KubeClient
from vkprovider.node.agent import NodeAgent
from vkprovider.placement import PlacementConfig, Placer
from vkprovider.placement.config import RateLimitConfig
from vkprovider.plugins.guard import guard
from vkprovider.plugins.registry import instantiate
from vkprovider.pods.controller import PodController

OFFER = {
    "provider": "mem",
    "offer_id": "mem-h100",
    "gpu_type": "H100-SXM-80GB",
    "gpu_count": 1,
    "region": "eu-west",
    "price_per_hour": 1.0,
    "capacity": 1_000_000,
}


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


async def serve(args: argparse.Namespace) -> None:
    kube = await KubeClient.connect(args.kubeconfig, qps=args.kube_qps, burst=int(2 * args.kube_qps))
    if args.provider == "memory":
        settings: dict[str, Any] = {"offers": [OFFER], "run_at_once": True}
        providers = {"mem": guard(instantiate("vkprovider.plugins.memory:InMemoryProvider", "mem", settings))}
        server = None
    else:
        from vkprovider.sim.local import cloud_config, fakecloud_module

        config = cloud_config("mem", 1.0, capacity=1_000_000, provisioning_seconds=0, serving_after_seconds=0)
        server = fakecloud_module("server").FakeCloudServer(config)
        await server.start()
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
    # CPU time, not wall time: the machine is shared, and waiting is not what we look for.
    profile = cProfile.Profile(time.process_time) if args.profile else None
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    while line := (await reader.readline()).decode().strip():
        if line == "profile" and profile is not None:
            profile.enable()
            print(json.dumps({"profiling": True}), flush=True)
        elif line == "stats":
            times = os.times()
            rss, peak = rss_kb()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            stats = {
                "cpu_s": times.user + times.system,
                "rss_kb": rss,
                "peak_rss_kb": max(peak, usage.ru_maxrss),
                "calls": calls_by_kind(kube),
                "events_dropped": controller.events.dropped,
                # still to be written in the background (the bench counts a pod's cost once settled)
                "events_queued": sum(q.qsize() for q in controller.events._queues),
                "cached_pods": len(controller.informer.cache),
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
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
