"""A TCP proxy in front of the kube-apiserver, so a test can cut every watch mid-stream or
partition one replica from the apiserver.

The service's kubeconfig points here; TLS passes through untouched (the serving certificate
names 127.0.0.1). ``cut()`` aborts every open connection at once, which is what a load balancer
restart or a network blip does to long-running watches, without the apiserver itself restarting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.cuts = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        #: while set, every connection is refused (a network partition of this one client)
        self.blocked = False
        #: connections refused because the apiserver did not take them (it is down), and why
        self.refused = 0
        self.last_refusal = ""

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.cut()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def cut(self) -> int:
        """Abort every proxied connection (both sides); returns how many were open."""
        writers = list(self._open)
        for writer in writers:
            writer.transport.abort()
        self._open.clear()
        self.cuts += 1
        return len(writers) // 2

    def block(self) -> None:
        self.blocked = True
        self.cut()

    def unblock(self) -> None:
        self.blocked = False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 5)
        except (OSError, TimeoutError) as exc:
            self.refused += 1
            self.last_refusal = f"{time.strftime('%H:%M:%S')} {type(exc).__name__}: {exc}"
            writer.transport.abort()  # the apiserver is down: refuse, as it would
            return
        self._open.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._open.discard(w)
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ConnectionError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()
