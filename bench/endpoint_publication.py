"""EndpointSlice publication at 1,000 external replicas behind 10 Services: API writes per change
and the publisher's CPU per reconcile (no cluster: the publisher against an in-memory slice API,
so the figures are the publisher's own; the latency through kube-proxy is issue 25 item 4).

    .venv/bin/python bench/endpoint_publication.py [--replicas 1000] [--services 10]

Two shapes: every replica of a provider on the same port mapping (fakecloud, a remote cluster:
one slice per 100 endpoints), and each replica on its own public ports (RunPod, Vast.ai: one
slice per replica). Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "traffic"))

from traffic_fakes import NODE, FakeInformer, SliceApi, pod, route, service

from vkprovider.traffic.publisher import EndpointPublisher

JSON = dict


def world(replicas: int, services: int, *, own_ports: bool) -> tuple[list[JSON], list[JSON]]:
    pods = []
    for i in range(replicas):
        app = f"app{i % services}"
        port = 30000 + i if own_ports else 8000
        address = f"198.18.{64 + i // 250}.{i % 250 + 1}"
        pods.append(pod(f"p{i:05}", labels={"app": app}, route_value=route(address, {8000: port})))
    svcs = [service(f"svc{s}", selector={"app": f"app{s}"}) for s in range(services)]
    return pods, svcs


def sync_cache(pub: EndpointPublisher, api: SliceApi) -> None:
    pub.slices.cache = {f"{ns}/{name}": copy.deepcopy(s) for (ns, name), s in api.slices.items()}


async def reconcile_all(pub: EndpointPublisher, api: SliceApi, keys: list[str]) -> tuple[int, float]:
    before, started = len(api.writes), time.process_time()
    for key in keys:
        await pub.reconcile(key)
    cpu = time.process_time() - started
    sync_cache(pub, api)
    return len(api.writes) - before, cpu


async def run(replicas: int, services: int, own_ports: bool) -> None:
    pods, svcs = world(replicas, services, own_ports=own_ports)
    api = SliceApi()
    pod_informer = FakeInformer(pods)
    pub = EndpointPublisher(api, NODE, pods=pod_informer, services=FakeInformer(svcs))  # type: ignore[arg-type]
    keys = [f"ns/{s['metadata']['name']}" for s in svcs]
    for s in svcs:
        pub.on_service("ADDED", None, s)
    first, cpu_first = await reconcile_all(pub, api, keys)
    again, cpu_again = await reconcile_all(pub, api, keys)
    # One endpoint change: a replica turns not ready (what an informer event brings).
    victim = pods[7]
    changed = copy.deepcopy(victim)
    changed["status"]["conditions"][0]["status"] = "False"
    pod_informer.cache[f"ns/{victim['metadata']['name']}"] = changed
    pub._dirty.clear()
    pub.on_pod("MODIFIED", victim, changed)
    dirty = sorted(pub._dirty)
    one, cpu_one = await reconcile_all(pub, api, dirty)
    # A restart: a new publisher whose informer listed the same slices.
    fresh = EndpointPublisher(api, NODE, pods=pod_informer, services=FakeInformer(svcs))  # type: ignore[arg-type]
    sync_cache(fresh, api)
    restart, cpu_restart = await reconcile_all(fresh, api, keys)
    shape = "own ports per replica" if own_ports else "shared port mapping"
    print(f"\n{replicas} replicas behind {services} Services, {shape}: {len(api.slices)} slices")
    print(f"  first publication: {first} writes, {cpu_first * 1000:.1f} ms CPU")
    print(f"  nothing changed:   {again} writes, {cpu_again * 1000:.1f} ms CPU (all {services} Services)")
    print(
        f"  one replica not ready: {len(dirty)} Service(s) marked, {one} write(s), {cpu_one * 1000:.2f} ms CPU"
    )
    print(f"  after a restart:   {restart} writes, {cpu_restart * 1000:.1f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--services", type=int, default=10)
    args = parser.parse_args()
    for own_ports in (False, True):
        asyncio.run(run(args.replicas, args.services, own_ports))


if __name__ == "__main__":
    main()
