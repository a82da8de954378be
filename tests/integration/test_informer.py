"""The informer against a real apiserver: list, watch, deletions, a relist after 410 Gone, and a
watch cut mid-stream (as an apiserver restart cuts it) that is resumed, not fatal."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes_asyncio import client, config

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeConflict, KubeGone, KubeUnavailable
from vkprovider.kube.informer import Informer

pytestmark = pytest.mark.cluster


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(str(cluster.kubeconfig))
    yield client
    await client.close()


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "i"}]},
    }


class ExpiringInformer(Informer):
    """Its first watch is answered with 410 Gone, as the apiserver does once a resourceVersion
    has been compacted away (which a fresh test cluster's watch cache never does in time)."""

    async def _watch(self, resource_version: str) -> None:
        if self.relists == 1:
            raise KubeGone(410, "too old resource version")
        return await super()._watch(resource_version)


async def test_informer_relists_after_410_and_keeps_watching(kube: KubeClient, namespace: str) -> None:
    seen: list[tuple[str, str]] = []
    informer = ExpiringInformer(
        kube,
        f"/api/v1/namespaces/{namespace}/pods",
        handler=lambda kind, old, new: seen.append((kind, new["metadata"]["name"])),
    )
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("before"))
    task = asyncio.create_task(informer.run())
    try:

        async def relisted() -> bool:
            return informer.relists >= 2

        await eventually(relisted, timeout=30)
        assert "/before" in "".join(informer.cache)
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("after"))

        async def watched() -> bool:
            return ("ADDED", "after") in seen

        await eventually(watched, timeout=30)
        await kube.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods/after", body={"gracePeriodSeconds": 0}
        )

        async def deleted() -> bool:
            return ("DELETED", "after") in seen and not any(k.endswith("/after") for k in informer.cache)

        await eventually(deleted, timeout=30)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_the_list_is_read_in_pages_and_cached_without_managed_fields(
    kube: KubeClient, namespace: str
) -> None:
    for i in range(5):
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod(f"paged-{i}"))
    informer = Informer(
        kube, f"/api/v1/namespaces/{namespace}/pods", handler=lambda kind, old, new: None, page_size=2
    )
    before = kube.calls_by["GET", "pods"]
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), timeout=30)
        assert kube.calls_by["GET", "pods"] - before == 3  # 2 + 2 + 1
        assert sorted(k.rsplit("/", 1)[1] for k in informer.cache) == [f"paged-{i}" for i in range(5)]
        assert all("managedFields" not in o["metadata"] for o in informer.cache.values())
        await kube.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/paged-0",
            body={"metadata": {"labels": {"seen": "yes"}}},
            content_type="application/merge-patch+json",
        )

        async def watched() -> bool:
            cached = informer.cache.get(f"{namespace}/paged-0") or {}
            return cached.get("metadata", {}).get("labels") == {"seen": "yes"}

        await eventually(watched, timeout=30)
        assert "managedFields" not in informer.cache[f"{namespace}/paged-0"]["metadata"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


class CuttableLink:
    """A TCP forwarder on 127.0.0.1 in front of the apiserver whose connections the test can cut
    at once, as an apiserver restart does to every open watch (TLS passes through untouched)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    def cut(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def test_a_watch_cut_mid_stream_is_resumed_without_a_relist(cluster: Cluster, namespace: str) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=configuration)
    target = urlsplit(configuration.host)
    assert target.hostname is not None and target.port is not None
    link = CuttableLink(target.hostname, target.port)
    await link.start()
    configuration.host = f"https://127.0.0.1:{link.port}"
    kube = KubeClient(client.ApiClient(configuration))
    seen: list[tuple[str, str]] = []
    informer = Informer(
        kube,
        f"/api/v1/namespaces/{namespace}/pods",
        handler=lambda kind, old, new: seen.append((kind, new["metadata"]["name"])),
        retry_seconds=0.1,
    )
    task = asyncio.create_task(informer.run())
    try:
        # Created after the list: seen only through the watch, so the watch is open when it is
        # seen (created before, it could come from the list, and the watch open after the cut).
        async with asyncio.timeout(30):
            await informer.synced.wait()
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("first"))

        async def saw(name: str) -> bool:
            return ("ADDED", name) in seen

        await eventually(lambda: saw("first"), timeout=30)
        link.cut()  # every open connection dies mid-stream

        async def created() -> bool:  # a pooled connection was cut too: the first try may fail
            try:
                await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("second"))
            except KubeConflict:
                return True  # the failed try got through after all
            except KubeUnavailable:
                return False
            return True

        await eventually(created, timeout=30)
        await eventually(lambda: saw("second"), timeout=30)
        assert not task.done()  # the cut did not escape the informer
        assert informer.reconnects >= 1 and informer.relists == 1  # resumed from its resourceVersion
        assert seen.count(("ADDED", "first")) == 1  # nothing replayed
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()
        await link.stop()
