"""Run an ASGI app in-process with uvicorn on a socket we bind (port 0 = a free port).

Binding first means the URL is known before serving starts and a port clash is a clear
``OSError`` at start-up rather than a log line from a background task.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Generator
from typing import Any

import uvicorn


class _NoSignals(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:  # the service owns signals
        yield


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
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = _NoSignals(config)
        self._ssl = ssl_context
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._ssl is not None:
            self._server.config.ssl = self._ssl
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
