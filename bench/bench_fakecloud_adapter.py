"""The client side of the HTTP provider path: CPU per call of the fakecloud adapter.

A fakecloud server (zero latency) runs in a process of its own (``vkprovider fakecloud``), so
this process's CPU time is the adapter's alone: deploy, get, list and delete of N deployments
(``--concurrency`` at once, as the pod workers do), and the watch stream's decoding of the
statuses it pushes. No control plane. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_fakecloud_adapter.py --deployments 1000 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml
from pods_service import FAKECLOUD

from vkprovider.models import Container, DeploymentRequest
from vkprovider.plugins.api import SupportsWatch
from vkprovider.plugins.registry import instantiate

# the same one-offer fakecloud bench_pods.py runs (room for every pod, Running at once)
CONFIG = FAKECLOUD
NODE = "vk-bench"


def cpu() -> float:
    times = os.times()
    return times.user + times.system


def request(uid: str) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="bench",
        name=f"p-{uid[:8]}",
        node_name=NODE,
        containers=[Container(name="server", image="registry.example/llm:1")],
        gpu_type="H100-SXM-80GB",
        gpu_count=1,
        offer_id="mem-h100",
    )


async def each(items: list[str], concurrency: int, call: Callable[[str], Awaitable[object]]) -> float:
    """CPU ms per call of ``call`` over ``items``, ``concurrency`` in flight."""
    left = list(items)

    async def worker() -> None:
        while left:
            await call(left.pop())

    started = cpu()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return 1000 * (cpu() - started) / len(items)


async def run(args: argparse.Namespace, url: str) -> None:
    provider = instantiate("fakecloud", "mem", {"url": url})
    assert isinstance(provider, SupportsWatch)
    uids = [str(uuid.uuid4()) for _ in range(args.deployments)]
    await provider.probe()
    figures = {
        "deploy": await each(uids, args.concurrency, lambda uid: provider.deploy(request(uid))),
        "get": await each(uids, args.concurrency, provider.get),
    }
    started = cpu()
    for _ in range(args.lists):
        listed = await provider.list(NODE)
    figures[f"list of {len(listed)} (per status)"] = 1000 * (cpu() - started) / args.lists / len(listed)
    received = 0
    started = cpu()
    async with asyncio.timeout(60):
        async for _ in provider.watch(NODE):  # the current state of every deployment first
            received += 1
            if received == len(uids):
                break
    figures["watch event"] = 1000 * (cpu() - started) / received
    figures["delete"] = await each(uids, args.concurrency, provider.delete)
    await provider.close()
    print(f"{args.deployments} deployments, {args.concurrency} at once; adapter CPU ms per call:")
    for name, value in figures.items():
        print(f"  {name:<28} {value:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--lists", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "fakecloud.yaml")
        config.write_text(yaml.safe_dump(CONFIG))
        server = subprocess.Popen(
            [sys.executable, "-m", "vkprovider", "fakecloud", "--port", "0", "--config", str(config)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline().strip()
            if not line.startswith("fakecloud listening on "):
                raise SystemExit(f"fakecloud did not start: {line!r}")
            started = time.perf_counter()
            asyncio.run(run(args, line.rsplit(" ", 1)[1]))
            print(f"(wall {time.perf_counter() - started:.1f} s, load {os.getloadavg()[0]:.1f})")
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
