"""One keep-alive HTTP/1.1 connection: one exchange at a time, the answer parsed by llhttp."""

from __future__ import annotations

import asyncio
import zlib
from typing import NamedTuple, cast

import httptools


class H1Error(Exception):
    """An exchange failed in a way HTTP describes (the connection or the answer), not the OS."""


class Disconnected(H1Error):
    """The server closed the connection before the answer was complete.

    ``received``: some of the answer had arrived (the request certainly reached the server)."""

    def __init__(self, message: str, *, received: bool) -> None:
        super().__init__(message)
        self.received = received


class ProtocolError(H1Error):
    """An answer that is not HTTP/1.1, or larger than the limits."""


class Answer(NamedTuple):
    status: int
    #: (lower-cased name, value), in the order received (``content-encoding`` dropped once the
    #: body is decoded)
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


class Connection(asyncio.Protocol):
    """The protocol of one connection; :class:`~vkprovider.h1.Pool` drives it."""

    def __init__(self, *, max_header_bytes: int, max_body_bytes: int) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._max_header_bytes = max_header_bytes
        self._max_body_bytes = max_body_bytes
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Answer] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._gzip: zlib._Decompress | None = None
        self._received = False
        self._keep_alive = True
        self.lost = False
        #: set by the pool once an exchange on this connection completed
        self.reused = False
        #: loop time the connection last became idle (the pool's keep-alive clock)
        self.idle_since = 0.0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport reads and writes; uvloop's TLS transport is not an
        # ``asyncio.Transport`` subclass, so this is a cast, not an isinstance check.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            # Bytes nobody asked for: the next answer could not be told from them.
            self._keep_alive = False
            self.abort()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"malformed answer: {_cause(exc)}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._waiter is not None and not self._waiter.done():
            why = f": {exc}" if exc else ""
            self._waiter.set_exception(
                Disconnected(
                    f"the server closed the connection before answering{why}", received=self._received
                )
            )
        self._waiter = None

    # httptools callbacks (an exception raised here fails feed_data)

    def on_message_begin(self) -> None:
        if self._waiter is None:  # a second answer in the same bytes: nobody asked for it
            self._keep_alive = False
            raise ProtocolError("an answer nobody asked for")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > self._max_header_bytes:
            raise ProtocolError(f"answer headers over {self._max_header_bytes} bytes")
        name = name.lower()
        if name == b"content-encoding":
            encoding = value.strip().lower()
            if encoding == b"gzip":
                self._gzip = zlib.decompressobj(wbits=31)
            elif encoding not in (b"", b"identity"):
                raise ProtocolError(f"unsupported Content-Encoding {value[:40]!r}")
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        if self._gzip is not None:
            room = self._max_body_bytes - self._body_bytes
            body = self._gzip.decompress(body, room + 1)
        self._body_bytes += len(body)
        if self._body_bytes > self._max_body_bytes:
            raise ProtocolError(f"answer body over {self._max_body_bytes} bytes")
        self._body.append(body)

    def on_message_complete(self) -> None:
        headers = self._headers
        if self._gzip is not None:  # the body is delivered decoded: say so
            headers = [(k, v) for k, v in headers if k != b"content-encoding"]
        answer = Answer(self._parser.get_status_code(), headers, b"".join(self._body))
        self._keep_alive = self._parser.should_keep_alive()
        self._headers, self._header_bytes, self._body, self._body_bytes, self._gzip = [], 0, [], 0, None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(answer)

    # the pool's side

    def exchange(self, request: bytes) -> asyncio.Future[Answer]:
        """Send ``request`` (a whole HTTP/1.1 message); the future is its answer."""
        assert self._transport is not None and self._waiter is None
        self._received = False
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        return self._waiter

    @property
    def usable(self) -> bool:
        """Idle, open, and the last answer allowed another exchange."""
        return (
            self._waiter is None
            and self._keep_alive
            and not self.lost
            and self._transport is not None
            and not self._transport.is_closing()
        )

    def abort(self) -> None:
        """Close at once (no TLS close_notify wait): the connection's state is unknown or done."""
        self._keep_alive = False
        if self._transport is not None:
            self._transport.abort()

    def _fail(self, exc: H1Error) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.abort()


def _cause(exc: BaseException) -> str:
    """A parser error names the callback's own error (our limits) before llhttp's."""
    inner = exc.__context__ or exc.__cause__
    return str(inner) if isinstance(inner, ProtocolError) else str(exc)
