"""Caps on log streams: follow streams per pod and per provider (429 + Retry-After beyond, a slot
freed when a stream ends), a maximum lifetime and an idle timeout, and ``limitBytes`` enforced
by the kubelet API even for a provider that ignores it. Through the real kubelet API over TLS."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.kubelet_tls import Kubelet, Source, serve_kubelet
from vkprovider.config import KubeletConfig
from vkprovider.http.log_caps import LogStreamCaps, LogStreamLimiter, TooManyStreams, bounded
from vkprovider.models import Capabilities, LogOptions, ProviderInfo
from vkprovider.plugins.guard import guard
from vkprovider.plugins.memory import InMemoryProvider


class Chatty(InMemoryProvider):
    """Follow streams that never end; ignores ``limit_bytes`` on purpose. Counts open streams."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.open_streams = 0

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self.name, adapter="chatty", version="0", capabilities=Capabilities(logs=True)
        )

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        self.open_streams += 1
        try:
            yield b"x" * 1000
            while options.follow:
                await asyncio.sleep(0.05)
                yield b"more\n"
        finally:
            self.open_streams -= 1


async def settle(cloud: Chatty, open_streams: int) -> None:
    for _ in range(200):  # bounded wait for the server to notice clients that left
        if cloud.open_streams == open_streams:
            return
        await asyncio.sleep(0.05)
    assert cloud.open_streams == open_streams


@contextlib.asynccontextmanager
async def kubelet_with(tmp_path: Path, caps: LogStreamCaps | None) -> AsyncIterator[tuple[Kubelet, Chatty]]:
    cloud = Chatty("chatty")
    source = Source({"chatty": guard(cloud)})
    for n in range(3):
        source.add_pod("ns", f"p{n}", f"uid-{n}", "chatty")
    async with serve_kubelet(tmp_path, source, caps) as kubelet:
        yield kubelet, cloud


async def open_follows(
    client: httpx.AsyncClient, stack: contextlib.AsyncExitStack, pod: str, count: int
) -> list[AsyncIterator[bytes]]:
    held = []
    for _ in range(count):
        response = await stack.enter_async_context(
            client.stream("GET", f"/containerLogs/ns/{pod}/main", params={"follow": "true"})
        )
        assert response.status_code == 200
        chunks = response.aiter_bytes()
        await anext(chunks)
        held.append(chunks)
    return held


async def test_the_eleventh_follow_on_one_pod_is_refused_with_retry_after(tmp_path: Path) -> None:
    async with kubelet_with(tmp_path, None) as (kubelet, cloud), kubelet.client() as client:  # the defaults
        async with contextlib.AsyncExitStack() as streams:
            held = await open_follows(client, streams, "p0", 10)
            refused = await client.get("/containerLogs/ns/p0/main", params={"follow": "true"})
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "10"
            assert "pod uid-0 already has 10 follow streams" in refused.text
            assert "max_follow_per_pod = 10" in refused.text
            # another pod of the same provider is not affected
            async with contextlib.AsyncExitStack() as other:
                assert len(await open_follows(client, other, "p1", 1)) == 1
            del held
        await settle(cloud, 0)
        # the streams ended: their slots are free again
        async with contextlib.AsyncExitStack() as streams:
            assert len(await open_follows(client, streams, "p0", 10)) == 10


async def test_the_provider_cap_counts_every_pod_and_snapshots_are_not_counted(tmp_path: Path) -> None:
    caps = LogStreamCaps(max_follow_per_pod=2, max_follow_per_provider=3, retry_after_seconds=7)
    async with kubelet_with(tmp_path, caps) as (kubelet, cloud), kubelet.client() as client:
        async with contextlib.AsyncExitStack() as streams:
            held = await open_follows(client, streams, "p0", 2)
            held += await open_follows(client, streams, "p1", 1)
            refused = await client.get("/containerLogs/ns/p2/main", params={"follow": "true"})
            assert (refused.status_code, refused.headers["Retry-After"]) == (429, "7")
            assert "provider 'chatty' already serves 3 follow streams" in refused.text
            snapshot = await client.get("/containerLogs/ns/p2/main")
            assert snapshot.status_code == 200 and snapshot.content == b"x" * 1000
            del held
        await settle(cloud, 0)


async def test_limit_bytes_is_enforced_for_a_provider_that_ignores_it(tmp_path: Path) -> None:
    async with kubelet_with(tmp_path, None) as (kubelet, cloud), kubelet.client() as client:
        for follow in ("false", "true"):
            resp = await client.get(
                "/containerLogs/ns/p0/main", params={"limitBytes": "10", "follow": follow}
            )
            assert resp.status_code == 200 and resp.content == b"x" * 10
        await settle(cloud, 0)  # the follow ended at the limit and its provider stream was closed


async def test_a_stream_is_ended_after_its_maximum_lifetime(tmp_path: Path) -> None:
    caps = LogStreamCaps(max_stream_seconds=0.5)
    async with kubelet_with(tmp_path, caps) as (kubelet, cloud), kubelet.client() as client:
        resp = await client.get("/containerLogs/ns/p0/main", params={"follow": "true"})
        assert resp.status_code == 200
        assert resp.text.startswith("x" * 1000) and "more\n" in resp.text
        assert resp.text.endswith(
            "log stream closed: open for 0.5 s (kubelet.logs.max_stream_seconds); run kubectl logs again to go on]\n"
        )
        await settle(cloud, 0)


async def idle_source(closed: list[bool]) -> AsyncIterator[bytes]:
    try:
        yield b"hello\n"
        await asyncio.sleep(3600)  # a pod that went quiet
        yield b"never\n"
    finally:
        closed.append(True)


async def test_an_idle_stream_is_ended_and_its_source_closed() -> None:
    closed: list[bool] = []
    released: list[bool] = []
    caps = LogStreamCaps(idle_timeout_seconds=0.2)
    chunks = [c async for c in bounded(idle_source(closed), caps, lambda: released.append(True))]
    assert chunks[0] == b"hello\n"
    assert b"no output for 0.2 s (kubelet.logs.idle_timeout_seconds)" in chunks[1]
    assert closed == [True] and released == [True]


def test_limiter_counts_and_releases_once() -> None:
    limiter = LogStreamLimiter(LogStreamCaps(max_follow_per_pod=1, max_follow_per_provider=2))
    a = limiter.admit("cloud", "uid-a")
    with pytest.raises(TooManyStreams, match="max_follow_per_pod"):
        limiter.admit("cloud", "uid-a")
    b = limiter.admit("cloud", "uid-b")
    with pytest.raises(TooManyStreams, match="max_follow_per_provider"):
        limiter.admit("cloud", "uid-c")
    assert limiter.admit("other", "uid-c") is not None  # per provider
    a.release()
    a.release()  # idempotent: a second release must not free someone else's slot
    assert limiter.open_streams("cloud") == 1
    limiter.admit("cloud", "uid-a")
    b.release()


def test_config_section_defaults_and_validation() -> None:
    logs = KubeletConfig().logs
    assert (logs.max_follow_per_pod, logs.max_follow_per_provider) == (10, 50)
    assert (logs.max_stream_seconds, logs.idle_timeout_seconds) == (3600, 900)
    assert LogStreamCaps(**logs.model_dump()) == LogStreamCaps()
    with pytest.raises(ValueError, match="max_follow_per_pod"):
        KubeletConfig.model_validate({"logs": {"max_follow_per_pod": 0}})
