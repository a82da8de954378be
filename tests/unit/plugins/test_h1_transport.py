"""``H1Transport`` under ``DirectSender`` against a real HTTP server on 127.0.0.1: what reaches
the server, answers as httpx hands them to adapters, one connection kept, failures as httpx's
classes (and, through the fakecloud adapter's mapping, ``Transient``)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from vkprovider_fakecloud.mapping import error_for_exception

from tests.support import http_server
from vkprovider.devcluster import pki
from vkprovider.errors import Transient
from vkprovider.plugins.api import ApiKeySource, DirectSender, H1Transport


class Api:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, bytes]] = []
        self.peers: set[tuple[str, int]] = set()
        self.key = "key-2"
        self.key_file: Path | None = None
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append((request.method, request.path_qs, request.headers.get("Authorization", ""), body))
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.peers.add(peer)
        if request.headers.get("Authorization") not in (None, f"Bearer {self.key}"):
            if self.key_file is not None:
                self.key_file.write_text(self.key)  # the key rotates as the old one is refused
            return web.json_response({"code": "Unauthorized"}, status=401)
        if request.path == "/v1/slow":
            await self.release.wait()
        if request.path == "/v1/hangup":
            assert request.transport is not None
            request.transport.close()
            await self.release.wait()
        if request.path == "/v1/gzip":
            packed = gzip.compress(json.dumps({"zipped": True}).encode())
            return web.Response(
                body=packed, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
            )
        return web.json_response(
            {"method": request.method, "echo": json.loads(body) if body else None}, status=201
        )


@pytest.fixture
async def api() -> AsyncIterator[tuple[Api, str]]:
    api = Api()
    async with http_server(api.handle, on_stop=api.release.set) as url:
        yield api, url + "/v1"


async def test_plain_calls_arrive_as_sent_and_share_one_connection(api: tuple[Api, str]) -> None:
    server, base = api
    transport = H1Transport()
    sender = DirectSender(transport, base_url=base, timeout=5, headers={"Accept": "application/json"})
    try:
        created = await sender.request("POST", "/deployments", json={"uid": "u-1", "gpus": 2})
        listed = await sender.request("GET", "/deployments", params={"node": "vk a", "limit": 5})
        gone = await sender.request("DELETE", "/deployments/u-1")
        zipped = await sender.request("GET", "/gzip")
    finally:
        await transport.aclose()
    assert created.status_code == 201 and created.json() == {
        "method": "POST",
        "echo": {"uid": "u-1", "gpus": 2},
    }
    assert created.request.url == httpx.URL(base + "/deployments")
    assert listed.json()["method"] == "GET" and gone.json()["method"] == "DELETE"
    assert zipped.json() == {"zipped": True}
    assert [(m, p, b) for m, p, _, b in server.seen] == [
        ("POST", "/v1/deployments", b'{"uid":"u-1","gpus":2}'),
        ("GET", "/v1/deployments?node=vk+a&limit=5", b""),
        ("DELETE", "/v1/deployments/u-1", b""),
        ("GET", "/v1/gzip", b""),
    ]
    assert len(server.peers) == 1  # keep-alive: one connection for all four


async def test_the_key_rotation_rule_holds_over_it(api: tuple[Api, str], tmp_path: Path) -> None:
    server, base = api
    server.key_file = tmp_path / "key"
    server.key_file.write_text("key-1")
    source = ApiKeySource("cloud", api_key=None, api_key_env=None, api_key_file=server.key_file)
    transport = H1Transport()
    sender = DirectSender(transport, base_url=base, timeout=5, key=source)
    try:
        answer = await sender.request("GET", "/deployments")
    finally:
        await transport.aclose()
    assert answer.status_code == 201
    assert [auth for _, _, auth, _ in server.seen] == ["Bearer key-1", "Bearer key-2"]


async def test_failures_are_httpx_errors_and_transient_for_the_adapter(api: tuple[Api, str]) -> None:
    _, base = api
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    transport = H1Transport()
    try:
        refused = DirectSender(transport, base_url=f"http://127.0.0.1:{closed_port}/v1", timeout=5)
        with pytest.raises(httpx.ConnectError) as connect:
            await refused.request("GET", "/deployments")
        slow = DirectSender(transport, base_url=base, timeout=0.3)
        with pytest.raises(httpx.ReadTimeout) as timeout:
            await slow.request("GET", "/slow")
        hangup = DirectSender(transport, base_url=base, timeout=5)
        with pytest.raises(httpx.RemoteProtocolError) as cut:
            await hangup.request("POST", "/hangup", json={})
    finally:
        await transport.aclose()
    for caught, word in ((connect, "unreachable"), (timeout, "timed out"), (cut, "unreachable")):
        assert caught.value.request.url.host == "127.0.0.1"
        mapped = error_for_exception("cloud", caught.value)
        assert isinstance(mapped, Transient) and mapped.message.startswith(word), mapped.message


async def test_an_unsupported_scheme_is_refused_by_name() -> None:
    transport = H1Transport()
    with pytest.raises(httpx.UnsupportedProtocol, match="ftp"):
        await transport.handle_async_request(httpx.Request("GET", "ftp://127.0.0.1/x"))
    await transport.aclose()


async def test_https_origins_are_verified_by_default(tmp_path: Path) -> None:
    """A server whose certificate no default CA signed is refused; with its CA given it answers,
    and a name the certificate does not carry is refused even then."""
    ca = pki.CertificateAuthority.create(tmp_path)
    pair = ca.issue(tmp_path, "server", "cloud", server=True, ip_addresses=("127.0.0.1",))
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(pair.cert, pair.key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    trusting = ssl.create_default_context(cafile=str(ca.pair.cert))
    try:
        default = H1Transport()
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await default.handle_async_request(httpx.Request("GET", f"https://127.0.0.1:{port}/v1/x"))
        await default.aclose()
        given = H1Transport(verify=trusting)
        answer_ok = await given.handle_async_request(httpx.Request("GET", f"https://127.0.0.1:{port}/v1/x"))
        assert (answer_ok.status_code, answer_ok.content) == (200, b"{}")
        with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|match"):
            await given.handle_async_request(httpx.Request("GET", f"https://localhost:{port}/v1/x"))
        await given.aclose()
    finally:
        server.close()
