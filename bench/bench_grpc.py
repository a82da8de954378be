"""Deploy+get round-trips per second: in-process adapter vs the same adapter over gRPC.

Run: ``.venv/bin/python bench/bench_grpc.py [--seconds S] [--concurrency N]``. The adapter is
a trivial in-memory one (this module's ``BenchProvider``), so the figures measure the plugin
machinery: guard, conversion, gRPC on a unix socket. Variants:

* ``in-process``: ``build_provider`` (guarded adapter), no I/O at all;
* ``grpc, same process``: ``serve_adapter`` in this event loop + ``GrpcProvider``;
* ``grpc, plugin process``: ``vkprovider plugin serve`` launched by ``PluginSupervisor``.

A "round-trip" is one ``deploy`` plus one ``get`` of a fresh UID. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from vkprovider.config import GrpcPluginConfig, ProviderConfig
from vkprovider.models import Container, DeploymentRequest
from vkprovider.plugins.api import Provider
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.grpc.supervisor import PluginSupervisor
from vkprovider.plugins.guard import guard
from vkprovider.plugins.memory import InMemoryProvider
from vkprovider.plugins.registry import build_provider


class BenchProvider(InMemoryProvider):
    """The in-memory reference adapter: idempotent deploy, get, list, delete; no I/O."""


def request(uid: str) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="bench",
        name=f"pod-{uid[:8]}",
        node_name="vk-bench",
        containers=[Container(name="main", image="ghcr.io/example/infer:1", command=["serve"])],
        gpu_type="H100-SXM-80GB",
        gpu_count=1,
    )


async def measure(provider: Provider, seconds: float, concurrency: int) -> tuple[float, int]:
    """(round-trips per second, total) with ``concurrency`` workers for ``seconds``."""
    for _ in range(50):  # warm up
        uid = str(uuid.uuid4())
        await provider.deploy(request(uid))
        await provider.get(uid)
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            uid = str(uuid.uuid4())
            await provider.deploy(request(uid))
            await provider.get(uid)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - start), done


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    adapter = "bench_grpc:BenchProvider"
    sys.path.insert(0, str(Path(__file__).parent))
    rows: list[tuple[str, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="vkp-bench-") as tmp:
        inproc = build_provider(ProviderConfig(name="bench", adapter=adapter))
        server = await serve_adapter(BenchProvider("bench", BenchProvider.Settings()), f"unix:{tmp}/b.sock")
        same = guard(GrpcProvider.dial("bench", server.address))
        command = [sys.executable, "-m", "vkprovider", "plugin", "serve", adapter, "--name", "bench"]
        pythonpath = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
        supervisor = PluginSupervisor(
            "bench", GrpcPluginConfig(command=command), env={"PYTHONPATH": pythonpath}
        )
        plugin = guard(GrpcProvider("bench", supervisor))
        await plugin.probe()
        variants = [("in-process", inproc), ("grpc, same process", same), ("grpc, plugin process", plugin)]
        for label, provider in variants:
            for concurrency in args.concurrency:
                rate, _ = await measure(provider, args.seconds, concurrency)
                rows.append((label, concurrency, rate))
        await same.close()
        await server.stop(0)
        await plugin.close()
    print(f"deploy+get round-trips per second ({args.seconds:g} s each, unix socket for gRPC)")
    print(f"{'variant':<24}{'concurrency':>12}{'round-trips/s':>16}")
    for label, concurrency, rate in rows:
        print(f"{label:<24}{concurrency:>12}{rate:>16,.0f}")


if __name__ == "__main__":
    asyncio.run(main())
