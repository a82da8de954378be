"""A tiny HTTP/1.1 server on 127.0.0.1 that plays an apiserver's list and watch, and can cut a
watch mid-stream the way a restarting apiserver does (half a chunk, then the socket closes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from kubernetes_asyncio import client

from vkprovider.kube.client import KubeClient

#: Answer for one request: (list body) or (watch events, cut the stream at the end?).
Answer = tuple[dict[str, Any] | None, list[dict[str, Any]], bool]


class FakeApiserver:
    def __init__(self, answer: Callable[[str], Answer]) -> None:
        self._answer = answer
        self.requests: list[str] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode()
            self.requests.append(target)
            body, events, cut = self._answer(target)
            if body is not None:
                raw = json.dumps(body).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(raw), raw)
                )
            else:
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                )
                for event in events:
                    line = json.dumps(event).encode() + b"\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(line), line))
                    await writer.drain()
                if cut:
                    writer.write(b'40\r\n{"type": "MODIF')  # half a chunk, then gone
                else:
                    writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[KubeClient]:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        kube = KubeClient(client.ApiClient(client.Configuration(host=self.url)), qps=1000, burst=1000)
        try:
            yield kube
        finally:
            await kube.close()
            self._server.close()
            await self._server.wait_closed()


def pod(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resourceVersion": version}}
