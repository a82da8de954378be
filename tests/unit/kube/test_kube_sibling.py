"""``KubeClient.sibling``: the heartbeat client shares the apiserver and credentials but not the
connection pool or the limiter, so a Lease renewal goes through while pod traffic (or a flood
of reviews) has every connection busy and every token spent. A real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from tests.support import http_server
from vkprovider.kube.client import KubeClient

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/vk"
SLOW = "/api/v1/namespaces/ns/pods/slow"


class Api:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.slow_started = 0
        self.tokens: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.tokens.append(request.headers.get("Authorization", ""))
        if request.path == SLOW:
            self.slow_started += 1
            await self.release.wait()
        return web.json_response({"metadata": {"name": request.path.rsplit("/", 1)[-1]}})


@pytest.fixture
async def api() -> AsyncIterator[tuple[Api, str]]:
    api = Api()
    async with http_server(api.handle, on_stop=api.release.set) as url:
        yield api, url


def main_client(url: str, *, pool: int = 100, qps: float = 1000.0, burst: int = 1000) -> KubeClient:
    configuration = client.Configuration(host=url, api_key={"BearerToken": "sa-token"})
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    configuration.connection_pool_maxsize = pool
    return KubeClient(client.ApiClient(configuration), qps=qps, burst=burst)


async def test_the_sibling_renews_while_every_pooled_connection_is_busy(api: tuple[Api, str]) -> None:
    server, url = api
    kube = main_client(url, pool=2)
    beat = kube.sibling(pool=4)
    try:
        stuck = [asyncio.create_task(kube.request("GET", SLOW)) for _ in range(3)]
        while server.slow_started < 2:  # both pooled connections held by the apiserver
            await asyncio.sleep(0.01)
        lease = await beat.request("GET", LEASE)
        assert lease["metadata"]["name"] == "vk"
        assert not any(task.done() for task in stuck)  # the main pool is still exhausted
        assert server.slow_started == 2  # the third waits for a pooled connection
        # Same credentials: the sibling authenticates as the service does.
        assert server.tokens[-1] == "Bearer sa-token" and set(server.tokens) == {"Bearer sa-token"}
        server.release.set()
        await asyncio.gather(*stuck)
    finally:
        await beat.close()
        await kube.close()


async def test_the_sibling_is_not_throttled_by_the_shared_limiter(api: tuple[Api, str]) -> None:
    _, url = api
    kube = main_client(url, qps=0.01, burst=1)  # one token, then one per 100 s
    beat = kube.sibling(pool=4)
    try:
        await kube.request("GET", "/api/v1/namespaces/ns/pods/a")  # the only token
        queued = asyncio.create_task(kube.request("GET", "/api/v1/namespaces/ns/pods/b"))
        for _ in range(5):  # renewals keep going while the shared limiter makes pod traffic wait
            assert (await beat.request("GET", LEASE))["metadata"]["name"] == "vk"
        assert not queued.done()
        queued.cancel()
        await asyncio.gather(queued, return_exceptions=True)
    finally:
        await beat.close()
        await kube.close()


async def test_a_sibling_with_its_own_limiter_keeps_to_it(api: tuple[Api, str]) -> None:
    server, url = api
    kube = main_client(url)
    reviews = kube.sibling(pool=2, qps=0.01, burst=2)
    try:
        await reviews.request("GET", LEASE)
        await reviews.request("GET", LEASE)
        third = asyncio.create_task(reviews.request("GET", LEASE))
        await kube.request("GET", "/api/v1/namespaces/ns/pods/a")  # the main client is not held up
        assert not third.done()
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)
        assert len(server.tokens) == 3
    finally:
        await reviews.close()
        await kube.close()


async def test_sequential_requests_reuse_one_kept_alive_connection(api: tuple[Api, str]) -> None:
    """The figure the pod bench prints (connections opened) counts what the pool really opened:
    one connection for calls made one after another, one per call in flight at once."""
    server, url = api
    kube = main_client(url, pool=8)
    try:
        for _ in range(5):
            await kube.request("GET", LEASE)
        assert kube.connections_opened == 1
        server.release.set()  # the slow path answers at once from here on
        await asyncio.gather(*(kube.request("GET", SLOW) for _ in range(3)))
        assert kube.connections_opened == 3  # the idle one, and two more for the two others in flight
    finally:
        await kube.close()
