"""The node under attack: does the heartbeat hold, and do pods still start, while thousands of
connections without credentials send random bearer tokens to the admin API (``--attack
tokens``) or hold half-sent TLS requests on the kubelet API (``--attack halfsent``)?

Real control plane; the real service (``vkprovider serve``) in a process of its own, its admin
API bound beyond loopback (so it authenticates, as ``deploy/base`` has it), the reference memory
adapter in ``run_at_once`` mode as its provider, the service's default API limits (50 QPS). Two
runs on one control plane: without the attack, then with ``bench/flood.py`` (its own process)
holding ``--connections`` connections for the whole run: ``tokens``, keep-alive connections to
the admin port sending a fresh random bearer token each; ``halfsent``, TLS connections to the
kubelet port from 127.0.0.1..``--sources`` each holding a request head without its final empty
line, reopened when the server closes them. The kubelet API is served over TLS in every run
(the dev cluster's kubelet serving certificate, as ``tests/security/test_token_flood.py``). In each
run ``--pods`` pods are created bound to the node once the flood is under way, and figures are
taken on this process's clock:

* Lease renewal lateness: the node Lease is read every 0.25 s; lateness is how far ``now -
  renewTime`` went past the renew interval (0 = every renewal on time; goal < 1 s);
* pods/s bound → Running+Ready (watch), and its ratio with the run without attack (goal ≥ 90 %);
* the service's peak RSS (``VmHWM``), and what the attackers were answered.

    .venv/bin/python bench/bench_attack.py --attack tokens                 # 2,000 connections
    .venv/bin/python bench/bench_attack.py --attack tokens --connections 500 --pods 100
    .venv/bin/python bench/bench_attack.py --attack halfsent               # 2,000 on the kubelet port

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pods import NAMESPACE, Watch, pod
from pods_service import OFFER

from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient

HERE = Path(__file__).resolve().parent
RENEW_SECONDS = 2.0


def service_config(cluster: Cluster, node: str, admin_port: int, kubelet_port: int) -> dict[str, Any]:
    serving = cluster.kubelet_serving
    assert serving is not None  # the dev cluster issues it for 127.0.0.1
    return {
        "node": {
            "name": node,
            "internal_ip": "127.0.0.1",
            "kubelet_port": kubelet_port,
            "lease_renew_seconds": RENEW_SECONDS,
        },
        "kube": {"kubeconfig": str(cluster.kubeconfig)},  # the default limits: 50 QPS, burst 100
        "http": {"admin_host": "0.0.0.0", "admin_port": admin_port},
        "kubelet": {  # the default limits: 512 connections, 256 per address, 15 s per request
            "bind_host": "127.0.0.1",
            "tls_cert_file": str(serving.cert),
            "tls_key_file": str(serving.key),
            "client_ca_file": str(cluster.ca_cert),
        },
        "pods": {"drain_timeout_seconds": 1},
        "log_level": "WARNING",
        "providers": [
            {
                "name": "mem",
                "adapter": "vkprovider.plugins.memory:InMemoryProvider",
                "settings": {"offers": [OFFER], "run_at_once": True},
            }
        ],
    }


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def renew_time(lease: dict[str, Any]) -> float:
    stamp = str(lease["spec"]["renewTime"])
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def sample_lease(admin: KubeClient, node: str, lateness: list[float]) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
    while True:
        with contextlib.suppress(Exception):
            lease = await admin.request("GET", path)
            lateness.append(max(0.0, time.time() - renew_time(lease) - RENEW_SECONDS))
        await asyncio.sleep(0.25)


async def one_run(
    cluster: Cluster, admin: KubeClient, args: argparse.Namespace, attack: bool
) -> dict[str, Any]:
    run_name = args.attack if attack else "none"
    label = f"attack-{run_name}-{uuid.uuid4().hex[:4]}"
    node = f"vk-attack-{uuid.uuid4().hex[:6]}"
    admin_port, kubelet_port = free_port(), free_port()
    config = Path(tempfile.mkdtemp(prefix="bench-attack-")) / "config.yaml"
    config.write_text(json.dumps(service_config(cluster, node, admin_port, kubelet_port)))
    service = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "serve", "--config", str(config), env={**os.environ}
    )
    flood: asyncio.subprocess.Process | None = None
    lateness: list[float] = []
    sampler: asyncio.Task[None] | None = None
    watch: Watch | None = None
    try:
        # Ready: the node registered and its Lease renewed once.
        async with asyncio.timeout(120):
            while True:
                with contextlib.suppress(Exception):
                    await admin.request(
                        "GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
                    )
                    break
                if service.returncode is not None:
                    raise RuntimeError(f"the service exited with {service.returncode}")
                await asyncio.sleep(0.5)
        await asyncio.sleep(3.0)  # the pod controller's caches
        sampler = asyncio.create_task(sample_lease(admin, node, lateness))
        started_at = time.perf_counter()
        if attack:
            target = (
                [f"--url=https://127.0.0.1:{kubelet_port}/pods", f"--sources={args.sources}"]
                if args.attack == "halfsent"
                else [f"--url=http://127.0.0.1:{admin_port}/state"]
            )
            flood = await asyncio.create_subprocess_exec(
                sys.executable,
                str(HERE / "flood.py"),
                f"--attack={args.attack}",
                *target,
                f"--connections={args.connections}",
                f"--seconds={args.seconds}",
                stdout=asyncio.subprocess.PIPE,
            )
        await asyncio.sleep(args.warmup)  # the attack under way
        watch = Watch(admin, label)
        await watch.start()
        names = [f"{label}-{i:04d}" for i in range(args.pods)]
        limit = asyncio.Semaphore(32)

        async def create(name: str) -> None:
            async with limit:
                await admin.request(
                    "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(name, node, label)
                )

        t0 = time.perf_counter()
        await asyncio.gather(*(create(name) for name in names))
        await watch.until(lambda: len(watch.ready) + len(watch.failed) >= args.pods, args.timeout)
        up = max(watch.ready.values(), default=t0) - t0
        # Hold on until the attack ends (the same length of run without it), sampling the Lease.
        rest = started_at + args.seconds - time.perf_counter()
        if rest > 0:
            await asyncio.sleep(rest)
        answers: dict[str, int] = {}
        if flood is not None:
            out, _ = await flood.communicate()
            answers = json.loads(out or b"{}").get("answers", {})
        return {
            "run": run_name,
            "pods_per_s": len(watch.ready) / up if up > 0 else 0.0,
            "failed": len(watch.failed),
            "lease_late_max_s": max(lateness, default=float("nan")),
            "lease_samples": len(lateness),
            "peak_rss_mib": peak_rss_mib(service.pid),
            "answers": answers,
        }
    finally:
        if sampler is not None:
            sampler.cancel()
        if watch is not None:
            await watch.stop()
        if flood is not None and flood.returncode is None:
            flood.kill()
            await flood.wait()
        if service.returncode is None:
            service.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(service.wait(), 30)
            except TimeoutError:
                service.kill()
                await service.wait()


async def run(args: argparse.Namespace) -> None:
    cluster = await Cluster.start("bench-attack", gpu_nodes=0)
    admin = await KubeClient.connect(str(cluster.kubeconfig), qps=100_000, burst=100_000)
    try:
        await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        results = [await one_run(cluster, admin, args, attack=False)]
        if args.attack != "none":
            results.append(await one_run(cluster, admin, args, attack=True))
    finally:
        await admin.close()
        await cluster.stop(remove=True)
    base = results[0]["pods_per_s"] or float("nan")
    what = {
        "tokens": "(random tokens) on the admin port",
        "halfsent": f"(half-sent TLS requests from {args.sources} addresses) on the kubelet port",
        "none": "(not run)",
    }[args.attack]
    print(
        f"\n{args.pods} pods, {args.connections} attacking connections {what}, "
        f"{args.seconds:.0f} s per run, Lease renewed every {RENEW_SECONDS:g} s"
    )
    print(
        "| run | pods/s bound→Running | vs no attack | Lease lateness max | peak RSS | attackers answered |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['run']} | {r['pods_per_s']:.1f} | {100 * r['pods_per_s'] / base:.0f} % | "
            f"{r['lease_late_max_s']:.2f} s ({r['lease_samples']} samples) | {r['peak_rss_mib']:.0f} MiB | "
            f"{json.dumps(r['answers'], sort_keys=True) if r['answers'] else '-'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attack", choices=("tokens", "halfsent", "none"), default="tokens")
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--sources", type=int, default=8, help="halfsent: source addresses 127.0.0.1..N")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each run (and of the attack)")
    parser.add_argument("--warmup", type=float, default=10.0, help="attack before the pods are created")
    parser.add_argument("--timeout", type=float, default=120.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
