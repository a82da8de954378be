"""Hardening of the kubelet and admin servers (issue 21, items 5 and 6), against the real apps:
WebSockets never reach an app, no OpenAPI on the admin port, bodies over the limit are 413
(``POST /explain`` included), a failed review tells the caller nothing about the apiserver, a
bearer token over plain HTTP from another host is refused, and the kubelet API warns at start
without a client CA."""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client

from tests.unit.http.test_auth import Reviews
from vkprovider.config import Settings
from vkprovider.devcluster import pki
from vkprovider.http.admin import create_admin_app
from vkprovider.http.auth import Authenticator, AuthMiddleware
from vkprovider.http.kubelet import create_kubelet_app, server_tls
from vkprovider.http.limits import ServerLimits
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeUnavailable
from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController
from vkprovider.served_node import ServedNode
from vkprovider.service import Service

POD = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
SMALL = ServerLimits(max_body_bytes=4096)


class NoPods:
    node_name = "vk"
    cache: dict[str, Any] = {}
    tracker: dict[str, Any] = {}
    providers: dict[str, Any] = {}

    @property
    def informer(self) -> Any:
        return self


@pytest.fixture
async def controller() -> AsyncIterator[PodController]:
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    yield PodController(KubeClient(api), {}, Placer({}), node_name="vk", host_ip="127.0.0.1")
    await api.close()


@pytest.fixture
async def admin(controller: PodController) -> AsyncIterator[str]:
    """The admin app on loopback (no authentication), with a small body limit."""
    server = AsgiServer(create_admin_app(Placer({}), controller), "127.0.0.1", 0, limits=SMALL)
    await server.start()
    try:
        yield server.url
    finally:
        await server.stop()


async def test_websocket_scopes_never_reach_the_app() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "websocket.connect"}

    middleware = AuthMiddleware(app, Authenticator(Reviews({}, set()), "vk"))
    await middleware({"type": "websocket", "path": "/pods", "headers": []}, receive, send)
    assert reached == [] and sent[0]["type"] == "websocket.close"


async def test_admin_port_serves_no_openapi_or_docs(admin: str) -> None:
    async with httpx.AsyncClient(base_url=admin) as http:
        for path in ("/openapi.json", "/docs", "/redoc"):
            assert (await http.get(path)).status_code == 404, path
        assert (await http.get("/healthz")).status_code == 200


async def test_explain_bodies_over_the_limit_are_413(admin: str) -> None:
    big = b'{"kind": "Pod", "pad": "' + b"x" * 10_000 + b'"}'

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it is read
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    async with httpx.AsyncClient(base_url=admin) as http:
        declared = await http.post("/explain", content=big)
        assert declared.status_code == 413 and "limit is 4096 bytes" in declared.text
        streamed = await http.post("/explain", content=chunked())
        assert streamed.status_code == 413 and "limit is 4096 bytes" in streamed.text
        ok = await http.post("/explain", json=POD)
        assert ok.status_code == 200, ok.text  # a pod within the limit is still explained


async def test_kubelet_bodies_over_the_limit_are_413_before_authentication(tmp_path: Path) -> None:
    ca = pki.CertificateAuthority.create(tmp_path)
    serving = ca.issue(tmp_path, "serving", "vk", server=True, ip_addresses=("127.0.0.1",))
    reviews = Reviews({}, set())
    app = create_kubelet_app(NoPods(), Authenticator(reviews, "vk"))
    server = AsgiServer(
        app, "127.0.0.1", 0, ssl_context=server_tls(str(serving.cert), str(serving.key), None), limits=SMALL
    )
    await server.start()
    try:
        async with httpx.AsyncClient(
            base_url=server.url, verify=ssl.create_default_context(cafile=str(ca.pair.cert))
        ) as http:
            resp = await http.post("/exec/ns/p/c", content=b"x" * 5000, headers={"Authorization": "Bearer t"})
        assert resp.status_code == 413 and "limit is 4096 bytes" in resp.text
        assert reviews.seen == []  # refused before any review was spent on it
    finally:
        await server.stop()


async def test_a_failed_review_tells_the_caller_nothing_about_the_apiserver(
    controller: PodController,
) -> None:
    class Down(Reviews):
        async def request(self, method: str, path: str, *, body: Any = None) -> Any:
            raise KubeUnavailable(0, "POST https://10.96.0.1:443/apis/...: dial tcp: connection refused")

    app = create_kubelet_app(NoPods(), Authenticator(Down({}, set()), "vk"))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 4000))
    async with httpx.AsyncClient(transport=transport, base_url="https://vk") as http:
        resp = await http.get("/pods", headers={"Authorization": "Bearer t"})
    assert resp.status_code == 401 and "could not review" in resp.text
    for leak in ("10.96.0.1", "dial tcp", "connection refused", "https://"):
        assert leak not in resp.text


async def test_cleartext_tokens_from_other_hosts_are_refused(controller: PodController) -> None:
    reviews = Reviews({"ops-token": "ops"}, {("ops", "get", "proxy")})
    app = create_admin_app(Placer({}), controller, auth=Authenticator(reviews, "vk"))
    token = {"Authorization": "Bearer ops-token"}

    def http(peer: str, scheme: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(peer, 4000))
        return httpx.AsyncClient(transport=transport, base_url=f"{scheme}://admin")

    async with http("10.1.2.3", "http") as remote:
        resp = await remote.get("/state", headers=token)
        assert resp.status_code == 403 and "plain HTTP" in resp.text and "http.tls_cert_file" in resp.text
        assert reviews.seen == []  # the token was not used
    async with http("127.0.0.1", "http") as local:  # a port-forward, the local CLI
        assert (await local.get("/state", headers=token)).status_code == 200
    async with http("10.1.2.3", "https") as remote_tls:  # the admin API serving TLS
        assert (await remote_tls.get("/state", headers=token)).status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_kubelet_api_without_a_client_ca_warns_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = pki.CertificateAuthority.create(tmp_path)
    serving = ca.issue(tmp_path, "serving", "vk", server=True, ip_addresses=("127.0.0.1",))
    settings = Settings.model_validate(
        {
            "node": {"name": "vk", "kubelet_port": _free_port()},
            "kubelet": {"tls_cert_file": str(serving.cert), "tls_key_file": str(serving.key)},
        }
    )
    service = Service(settings)
    # the one node's unit: only its controller is read by the kubelet API
    node = ServedNode(settings, settings.node, None, None, {}, Placer({}), None, NoPods())  # type: ignore[arg-type]
    service.units = [node]
    with caplog.at_level(logging.WARNING, logger="vkprovider.service"):
        await service._start_kubelet_api()
    assert service.kubelet is not None
    await service.kubelet.stop()
    assert any("without kubelet.client_ca_file" in r.getMessage() for r in caplog.records)
