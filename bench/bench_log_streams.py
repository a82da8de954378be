"""Status reads of a provider while tenants hold follow log streams on it (issue 21, item 4).

A RunPod-shaped cloud on 127.0.0.1 (tests/security/fake_runpod.py, a real HTTP server with an
endless chatty log stream) and the real RunPod adapter. ``--streams`` follow streams are opened
through the adapter's ``logs()`` on one pod, then ``--reads`` status reads (``get``) run one
after another; each read's latency and failures are printed. Works on main too (it uses only the
adapter's public methods), for the before/after figures in bench/README.md:

    .venv/bin/python bench/bench_log_streams.py --streams 50 --reads 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vkprovider_runpod.adapter import RunPodProvider

from tests.security import fake_runpod
from vkprovider.errors import ProviderError
from vkprovider.models import LogOptions


async def hold(stream: AsyncIterator[bytes], started: asyncio.Event) -> None:
    """Read one follow stream until cancelled (a tenant's ``kubectl logs -f``)."""
    try:
        async for _ in stream:
            started.set()
    except ProviderError:
        started.set()


async def main(streams: int, reads: int, timeout: float) -> None:
    async with fake_runpod.serve(interval=0.2) as (cloud, url):
        adapter = RunPodProvider(
            "runpod", RunPodProvider.Settings(api_key=fake_runpod.KEY, base_url=url, timeout_seconds=timeout)
        )
        await adapter.deploy(fake_runpod.request("uid-chatty"))
        events = [asyncio.Event() for _ in range(streams)]
        tasks = [
            asyncio.create_task(hold(adapter.logs("uid-chatty", LogOptions(follow=True)), e)) for e in events
        ]
        await asyncio.sleep(1.0)  # let the streams take their connections
        latencies: list[float] = []
        failures = 0
        for _ in range(reads):
            t0 = time.perf_counter()
            try:
                await adapter.get("uid-chatty")
            except ProviderError as exc:
                failures += 1
                print(f"  read failed after {time.perf_counter() - t0:.1f} s: {exc}")
            else:
                latencies.append((time.perf_counter() - t0) * 1000)
        print(
            f"streams asked {streams}, open at the cloud {cloud.open_streams}, adapter timeout {timeout:g} s"
        )
        p50 = f"{statistics.median(latencies):.1f} ms" if latencies else "-"
        print(f"status reads: {reads}, failed {failures}, p50 of the successful {p50}")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await adapter.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--reads", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=5.0, help="the adapter's timeout_seconds")
    args = parser.parse_args()
    asyncio.run(main(args.streams, args.reads, args.timeout))
