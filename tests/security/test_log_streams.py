"""Attack: a tenant with only ``pods/log`` opens follow streams on one chatty pod to stall the
pod's provider for everyone (issue 21, item 4).

Real parts: the kubelet API over TLS with its auth middleware, the real RunPod adapter with its
real HTTP pools, and a RunPod-shaped cloud served over TCP on 127.0.0.1 (``fake_runpod``; respx
mocks below the pool, where starvation cannot show). Before the fix the streams shared the
adapter's 20-connection pool: the status read behind them waited for a connection until the
adapter's timeout and failed, and the 51st stream was admitted like the others.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from vkprovider_runpod.adapter import RunPodProvider

from tests.kubelet_tls import Kubelet, Source, serve_kubelet
from tests.security import fake_runpod
from vkprovider.http.log_caps import LogStreamCaps
from vkprovider.models import Phase
from vkprovider.plugins.guard import guard

STREAMS = 50
#: The adapter's own timeout for a call: a status read that waits for a pooled connection longer
#: than this fails, which is how the starvation showed (30 s by default; 5 s keeps the test short).
TIMEOUT_SECONDS = 5.0


async def follow(
    client: httpx.AsyncClient, stack: contextlib.AsyncExitStack, path: str, held: list[AsyncIterator[bytes]]
) -> bytes:
    """Open one ``kubectl logs -f``-like stream and return its first chunk; the stream stays open
    (its iterator is kept in ``held``: a dropped one would close the connection)."""
    response = await stack.enter_async_context(client.stream("GET", path, params={"follow": "true"}))
    response.raise_for_status()
    chunks = response.aiter_bytes()
    held.append(chunks)
    return await anext(chunks)


@contextlib.asynccontextmanager
async def runpod_behind_kubelet(
    tmp_path: Path,
) -> AsyncIterator[tuple[fake_runpod.ChattyRunPod, RunPodProvider, Kubelet]]:
    async with fake_runpod.serve(interval=0.2) as (cloud, url):
        settings = RunPodProvider.Settings(
            api_key=fake_runpod.KEY, base_url=url, timeout_seconds=TIMEOUT_SECONDS
        )
        adapter = RunPodProvider("runpod", settings)
        source = Source({"runpod": guard(adapter)})
        source.add_pod("ns", "chatty", "uid-chatty", "runpod")
        # The per-pod cap (default 10, tested in tests/unit/http/test_log_caps.py) is raised so all
        # 50 streams can be on one pod: what is under attack here is the provider.
        caps = LogStreamCaps(max_follow_per_pod=STREAMS + 10, max_follow_per_provider=STREAMS)
        try:
            async with serve_kubelet(tmp_path, source, caps) as kubelet:
                yield cloud, adapter, kubelet
        finally:
            await adapter.close()


async def test_fifty_follow_streams_do_not_stall_deploy_status_or_delete(tmp_path: Path) -> None:
    async with runpod_behind_kubelet(tmp_path) as (cloud, adapter, kubelet):
        provider = guard(adapter)
        await provider.deploy(fake_runpod.request("uid-chatty"))
        limits = httpx.Limits(max_connections=STREAMS + 5)
        async with kubelet.client(limits=limits) as client, contextlib.AsyncExitStack() as streams:
            path = "/containerLogs/ns/chatty/main"
            held: list[AsyncIterator[bytes]] = []
            firsts = await asyncio.gather(*(follow(client, streams, path, held) for _ in range(STREAMS)))
            assert all(first.startswith(b"chatter") for first in firsts), firsts[:3]
            assert cloud.open_streams == STREAMS

            # The same provider still answers, each call within the adapter's own timeout.
            created = await provider.deploy(fake_runpod.request("uid-other"))
            assert created.phase is Phase.PENDING
            assert (await provider.get("uid-chatty")).uid == "uid-chatty"
            await provider.delete("uid-other")
            assert not any(p["name"].endswith("uid-other") for p in cloud.fake.pods.values())
            assert [s.uid for s in await provider.list("vk")] == ["uid-chatty"]

            # The 51st follow stream is refused at once, with a time to come back.
            refused = await client.get(path, params={"follow": "true"})
            assert refused.status_code == 429, refused.text
            assert refused.headers["Retry-After"] == "10"
            assert "max_follow_per_provider" in refused.text
            # A snapshot (no follow) is not a held stream and is still served.
            snapshot = await client.get(path, params={"limitBytes": "7"})
            assert snapshot.status_code == 200 and snapshot.text == "chatter", (
                snapshot.headers,
                snapshot.content,
            )

        # The clients went away: every stream to the cloud is closed (bounded wait).
        for _ in range(200):
            if cloud.open_streams == 0:
                break
            await asyncio.sleep(0.05)
        assert cloud.open_streams == 0
