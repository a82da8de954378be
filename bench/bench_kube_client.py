"""The cost of one API request in the service's client: through aiohttp with kubernetes_asyncio's
stock session (``trust_env=True``: a proxy and netrc lookup per request, on a thread pool),
through aiohttp with the proxy environment read once at start-up (what ``KubeClient`` does
behind a proxy), and through the lean pool (``vkprovider.h1``: what ``KubeClient`` does
otherwise). Real control plane. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_kube_client.py --requests 2000 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp

from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient


def stock_session(kube: KubeClient) -> None:
    """Put back a session as kubernetes_asyncio opens it (the figures' "before")."""
    rest = kube._api.rest_client
    connector = rest.pool_manager.connector
    rest.pool_manager.detach()
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=True, read_bufsize=2**21)


async def measure(kube: KubeClient, requests: int, concurrency: int) -> tuple[float, float]:
    """(CPU ms per request, requests per second) for ``requests`` GETs, ``concurrency`` at once."""
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await kube.request("GET", "/api/v1/namespaces/default")

    await asyncio.gather(*(worker() for _ in range(concurrency)))  # warm the connection pool
    left = requests
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return 1000 * cpu / requests, requests / wall


async def run(requests: int, concurrency: int) -> None:
    cluster = await Cluster.start("bench-kube-client", gpu_nodes=0)
    try:
        rows = []
        variants = (
            ("aiohttp, stock (trust_env)", "stock"),
            ("aiohttp, env read once", "aiohttp"),
            ("lean pool (vkprovider.h1)", "lean"),
        )
        for label, how in variants:
            kube = await KubeClient.connect(str(cluster.kubeconfig), qps=100000, burst=100000)
            if how != "lean" and kube._lean is not None:
                await kube._lean.close()
                kube._lean = None  # every request through aiohttp, as behind a proxy
            if how == "stock":
                stock_session(kube)
            try:
                rows.append((label, *await measure(kube, requests, concurrency)))
            finally:
                await kube.close()
        print(f"{requests} GETs, {concurrency} in flight, real kube-apiserver on 127.0.0.1")
        print(f"{'session':32} {'CPU ms/request':>15} {'requests/s':>12}")
        for label, cpu_ms, rate in rows:
            print(f"{label:32} {cpu_ms:15.3f} {rate:12.0f}")
        print(f"CPU per request, env read once / stock: {rows[1][1] / rows[0][1]:.2f}")
        print(f"CPU per request, lean / aiohttp (env read once): {rows[2][1] / rows[1][1]:.2f}")
    finally:
        await cluster.stop(remove=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(run(args.requests, args.concurrency))


if __name__ == "__main__":
    main()
