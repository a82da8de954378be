"""Answers an apiserver (or a proxy in front of it) should not give, from a real HTTP server on
127.0.0.1: a 200 whose body is not JSON, a JSON body of the wrong shape. The client maps the
first to ``KubeUnavailable`` like any transport failure; leader election survives both and
leads once the Lease API answers properly again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from tests.support import eventually
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeUnavailable
from vkprovider.kube.leader import LeaderElector

JSON = dict[str, Any]
HTML = "<html><body>502 Bad Gateway (a proxy's page)</body></html>"


class LeaseApi:
    """Plays the Lease API; the first ``odd`` answers are odd (``html`` or a JSON list)."""

    def __init__(self, odd: list[str]) -> None:
        self.odd = list(odd)
        self.lease: JSON | None = None
        self.version = 0
        self.requests = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.odd:
            kind = self.odd.pop(0)
            if kind == "html":
                return web.Response(status=200, text=HTML, content_type="text/html")
            return web.json_response([])  # valid JSON, wrong shape
        if request.method == "GET":
            if self.lease is None:
                return web.json_response({"kind": "Status", "reason": "NotFound", "code": 404}, status=404)
            return web.json_response(self.lease)
        body = json.loads(await request.read())
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.lease = body
        return web.json_response(body, status=201 if request.method == "POST" else 200)


def holds(predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return predicate()

    return check


@pytest.fixture
async def served() -> AsyncIterator[tuple[LeaseApi, KubeClient]]:
    api = LeaseApi([])
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kube = KubeClient(
        client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}")), qps=1000, burst=1000
    )
    try:
        yield api, kube
    finally:
        await kube.close()
        await runner.cleanup()


async def test_a_200_with_a_non_json_body_is_kube_unavailable(served: tuple[LeaseApi, KubeClient]) -> None:
    api, kube = served
    api.odd = ["html"]
    with pytest.raises(KubeUnavailable) as caught:
        await kube.request("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x")
    assert caught.value.status == 0 and "DecodeError" in str(caught.value)
    # The connection and the client stay usable: the next (proper) answer decodes.
    lease = {"metadata": {"name": "x", "namespace": "ns"}, "spec": {}}
    created = await kube.request("POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", body=lease)
    assert created["metadata"]["resourceVersion"] == "1"


async def test_leader_election_survives_odd_answers_and_then_leads(
    served: tuple[LeaseApi, KubeClient],
) -> None:
    api, kube = served
    api.odd = ["html", "list", "html", "list"]
    elector = LeaderElector(kube, "ns", "vk", "me", lease_duration=3.0, renew_deadline=2.0, retry_period=0.05)
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.sleep(3600)

    run = asyncio.create_task(elector.run(lead))
    try:
        await eventually(holds(lambda: leading.is_set() or run.done()), timeout=20)
        assert not run.done(), f"leader election ended on an odd answer: {run.exception()!r}"
        assert elector.is_leader and api.lease is not None and api.lease["spec"]["holderIdentity"] == "me"
        # Odd answers while leading are failed renewals, not the end of the service either.
        api.odd = ["list", "html"]
        renewed = api.version
        await eventually(holds(lambda: api.version > renewed + 1 or run.done()), timeout=20)
        assert not run.done() and elector.is_leader
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
