"""Keep-alive connections to one server, at most ``limit`` exchanges at once (see the package doc)."""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Iterable
from urllib.parse import quote

from vkprovider.h1._connection import Answer, Connection, Disconnected

#: methods Go's transport retries on a reused connection closed before it answered (RFC 9110 §9.2.2)
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

#: a request target sent as is; anything else (spaces, non-ASCII…) is percent-encoded, as a URL
#: library would, so the request line can never be split
_PLAIN_TARGET = re.compile(r"[A-Za-z0-9/_.~:@!$&'()*+,;=%?-]*\Z")
_UNSAFE = re.compile(r"[\r\n\0]")


class Pool:
    """HTTP/1.1 to ``host:port``; ``ssl_context`` None: plain TCP. Close with :meth:`close`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        limit: int = 100,
        keepalive_seconds: float = 30.0,
        max_header_bytes: int = 64 * 1024,
        max_body_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._host, self._port = host, port
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._keepalive = keepalive_seconds
        self._max_header_bytes, self._max_body_bytes = max_header_bytes, max_body_bytes
        authority = f"[{host}]" if ":" in host else host
        default_port = 443 if ssl_context is not None else 80
        self._host_header = (authority if port == default_port else f"{authority}:{port}").encode("idna")
        self._slots = asyncio.Semaphore(limit)
        #: idle connections, oldest first (reused newest first: the ones least likely closed)
        self._idle: list[Connection] = []
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False
        #: connections opened so far (for figures and tests)
        self.opened = 0

    async def request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes | None = None,
        *,
        timeout: float,
    ) -> Answer:
        """One exchange: ``target`` is the path and query (``/api/v1/pods?limit=5``); ``headers``
        are sent after ``Host`` (``Content-Length`` is added for a body). The whole exchange,
        waiting for a slot and connecting included, takes at most ``timeout`` seconds."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        message = self._message(method, target, headers, body)
        async with asyncio.timeout(timeout), self._slots:
            retried = False
            while True:
                connection = self._idle_connection() or await self._open()
                try:
                    answer = await connection.exchange(message)
                except Disconnected as exc:
                    connection.abort()
                    if connection.reused and not exc.received and method in IDEMPOTENT and not retried:
                        retried = True  # the server's idle close raced us: once, on a new connection
                        continue
                    raise
                except BaseException:
                    connection.abort()  # timeout, cancellation, a malformed answer: state unknown
                    raise
                self._release(connection)
                return answer

    async def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.abort()

    # internals

    def _message(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> bytes:
        if _UNSAFE.search(method) or " " in method:
            raise ValueError(f"method {method!r}")
        if not _PLAIN_TARGET.match(target):
            target = quote(target, safe="/_.~:@!$&'()*+,;=%?-")
        lines = [f"{method} {target} HTTP/1.1\r\nHost: ".encode(), self._host_header, b"\r\n"]
        for name, value in headers:
            if _UNSAFE.search(name) or _UNSAFE.search(value):
                raise ValueError(f"header {name!r}: CR, LF and NUL are not allowed")
            lines.append(f"{name}: {value}\r\n".encode())
        if body is not None:
            lines.append(b"Content-Length: %d\r\n\r\n" % len(body))
            lines.append(body)
        else:
            lines.append(b"\r\n")
        return b"".join(lines)

    def _idle_connection(self) -> Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
            connection.abort()
        return None

    async def _open(self) -> Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            lambda: Connection(max_header_bytes=self._max_header_bytes, max_body_bytes=self._max_body_bytes),
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=(self._server_hostname or self._host) if self._ssl is not None else None,
        )
        self.opened += 1
        return connection

    def _release(self, connection: Connection) -> None:
        if self._closed or not connection.usable:
            connection.abort()
            return
        loop = asyncio.get_running_loop()
        connection.reused = True
        connection.idle_since = loop.time()
        self._idle.append(connection)
        if self._sweep is None:
            self._sweep = loop.call_later(self._keepalive, self._expire)

    def _expire(self) -> None:
        """Close connections idle longer than the keep-alive (oldest first); run again while any
        stay idle."""
        self._sweep = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() - self._keepalive
        while self._idle and self._idle[0].idle_since <= deadline:
            self._idle.pop(0).abort()
        if self._idle and not self._closed:
            wait = self._idle[0].idle_since + self._keepalive - loop.time()
            self._sweep = loop.call_later(max(wait, 0.0), self._expire)
