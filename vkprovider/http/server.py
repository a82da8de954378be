"""Run an ASGI app in-process with uvicorn on a socket we bind (port 0 = a free port).

Binding first means the URL is known before serving starts and a port clash is a clear
``OSError`` at start-up rather than a log line from a background task. With TLS, each
connection's verified client certificate is put in the request state (``scope["state"]
["peercert"]``) for :mod:`vkprovider.http.auth`: uvicorn does not expose it otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Generator
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol


class _NoSignals(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:  # the service owns signals
        yield


class _PeerCertProtocol(H11Protocol):
    """HTTP/1.1 whose per-connection request state carries the verified client certificate."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        peercert = ssl_object.getpeercert() if ssl_object is not None else None
        self.app_state = {**self.app_state, "peercert": peercert or None}


class AsgiServer:
    def __init__(self, app: Any, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(128)
        self._socket.setblocking(False)
        self.port: int = self._socket.getsockname()[1]
        scheme = "https" if ssl_context else "http"
        self.url = f"{scheme}://{host}:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=_PeerCertProtocol,
            ssl_context_factory=None if ssl_context is None else (lambda _config, _default: ssl_context),
        )
        self._server = _NoSignals(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=5)
        self._socket.close()
