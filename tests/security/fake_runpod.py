"""A RunPod-shaped cloud served over real HTTP on 127.0.0.1, with a chatty log stream.

respx mocks below httpx's connection pool, so pool starvation cannot show through it: this fake
is a real server (uvicorn, in-process) the adapter reaches over TCP with its real pools. Pods,
catalog, create (validated against the published ``CreatePodRequest`` when the spec is present)
and delete are the contract harness's :class:`FakeRunPod`; ``GET /v2/pods/{id}/logs`` is an
endless SSE stream, one line every ``interval`` seconds, that counts its open streams.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.contract.harness_runpod import BASE, FakeRunPod
from vkprovider.http.server import AsgiServer
from vkprovider.models import Container, DeploymentRequest

KEY = "runpod-test-key"


def request(uid: str) -> DeploymentRequest:
    """A one-GPU pod this cloud's catalog can place (its RTX 4090 offer in US-KS-2)."""
    return DeploymentRequest(
        uid=uid,
        namespace="ns",
        name=f"pod-{uid}",
        node_name="vk",
        containers=[Container(name="main", image="ghcr.io/example/infer:1")],
        gpu_type="RTX-4090-24GB",
        gpu_count=1,
        offer_id="SECURE/US-KS-2/NVIDIA GeForce RTX 4090/1",
    )


class ChattyRunPod:
    def __init__(self, interval: float = 0.2) -> None:
        self.fake = FakeRunPod()
        self.interval = interval
        self.open_streams = 0
        self.streams_served = 0
        routes = [
            Route("/v2/catalog/gpus", self._bridge(lambda r, **_: self.fake.catalog(r)), methods=["GET"]),
            Route("/v2/pods", self._bridge(lambda r, **_: self.fake.list_pods(r)), methods=["GET"]),
            Route("/v2/pods", self._bridge(lambda r, **_: self.fake.create(r)), methods=["POST"]),
            Route("/v2/pods/{pod_id}/logs", self._logs, methods=["GET"]),
            Route("/v2/pods/{pod_id}", self._bridge(self.fake.get_pod), methods=["GET"]),
            Route("/v2/pods/{pod_id}", self._bridge(self.fake.delete), methods=["DELETE"]),
        ]
        self.app = Starlette(routes=routes)

    @staticmethod
    def _authorized(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {KEY}"

    def _bridge(self, handler: Any) -> Any:
        """A Starlette endpoint calling one of the harness's httpx-shaped handlers."""

        async def endpoint(request: Request) -> Response:
            if not self._authorized(request):
                return PlainTextResponse("unauthorized", status_code=401)
            url = BASE + request.url.path + (f"?{request.url.query}" if request.url.query else "")
            inner = httpx.Request(request.method, url, content=await request.body())
            answer: httpx.Response = await handler(inner, **request.path_params)
            headers = {
                k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "retry-after")
            }
            return Response(answer.content, status_code=answer.status_code, headers=headers)

        return endpoint

    async def _logs(self, request: Request) -> Response:
        if not self._authorized(request):
            return PlainTextResponse("unauthorized", status_code=401)
        if request.path_params["pod_id"] not in self.fake.pods:
            return PlainTextResponse("pod not found", status_code=404)
        self.streams_served += 1
        return StreamingResponse(self._chatter(), media_type="text/event-stream")

    async def _chatter(self) -> AsyncIterator[bytes]:
        self.open_streams += 1
        try:
            for n in itertools.count():
                event = {"ts": "2026-06-01T12:00:00Z", "source": "container", "line": f"chatter {n}"}
                yield f"id: {n}\ndata: {json.dumps(event)}\n\n".encode()
                await asyncio.sleep(self.interval)
        finally:
            self.open_streams -= 1


@asynccontextmanager
async def serve(interval: float = 0.2) -> AsyncIterator[tuple[ChattyRunPod, str]]:
    """The fake on 127.0.0.1 (a free port): ``(fake, base_url)``."""
    cloud = ChattyRunPod(interval)
    server = AsgiServer(cloud.app, "127.0.0.1", 0)
    await server.start()
    try:
        yield cloud, server.url
    finally:
        await server.stop()
