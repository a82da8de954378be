"""Run an ASGI app in-process with uvicorn on a socket we bind (port 0 = a free port), bounded.

Binding first means the URL is known before serving starts and a port clash is a clear
``OSError`` at start-up rather than a log line from a background task. With TLS, each
connection's verified client certificate is put in the request state (``scope["state"]
["peercert"]``) for :mod:`vkprovider.http.auth`: uvicorn does not expose it otherwise.

Every server is bounded by its :class:`~vkprovider.http.limits.ServerLimits` (an unauthenticated
caller must not be able to exhaust memory by holding connections):

* uvicorn accepts plain TCP; :class:`_Admission`, the protocol of each accepted connection,
  takes a slot (total and per peer) *before* any TLS state is allocated, closes the connection
  at once when there is none, and runs the TLS handshake itself (``loop.start_tls``) with the
  handshake timeout;
* :class:`_BoundedH11` is uvicorn's HTTP/1.1 with a deadline to receive each complete request
  (408 and close past it; uvicorn only times out idle keep-alives);
* uvicorn's own options bound the rest: ``timeout_keep_alive``, ``h11_max_incomplete_event_size``
  (the request head), ``limit_concurrency`` (a backstop above the connection cap), no
  WebSocket upgrades; :class:`~vkprovider.http.body.BodyLimit` bounds bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Generator
from typing import Any, cast

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from vkprovider.http.body import BodyLimit
from vkprovider.http.limits import ConnectionCounter, ServerLimits

log = logging.getLogger(__name__)

#: After a timed-out request's 408 the peer gets this long to take it before the connection is aborted.
_CLOSE_GRACE_SECONDS = 1.0
_REFUSAL_LOG_SECONDS = 60.0


class _NoSignals(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:  # the service owns signals
        yield


class _BoundedH11(H11Protocol):
    """HTTP/1.1 with the verified client certificate in the request state and a deadline for
    each complete request (from the connection, or from the previous response)."""

    request_timeout: float = 15.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        peercert = ssl_object.getpeercert() if ssl_object is not None else None
        self.app_state = {**self.app_state, "peercert": peercert or None}
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._request_timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
            self._disarm()  # the request is complete: the app's time is not the caller's

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is not h11.DONE:
            self._arm()  # the next request (keep-alive), or the rest of this one, has its deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _request_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state in (h11.DONE, h11.MUST_CLOSE):
            return
        started = self.conn.their_state is not h11.IDLE or bool(self.conn.trailing_data[0])
        if started and self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # begun, not answered
            text = f"request not complete within {self.request_timeout:g}s\n".encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"connection: close\r\ncontent-length: " + str(len(text)).encode() + b"\r\n\r\n" + text
            )
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()
        self.loop.call_later(_CLOSE_GRACE_SECONDS, self.transport.abort)  # a TLS close may wait on the peer


class _Admission(asyncio.Protocol):
    """One accepted TCP connection: admitted against the caps or closed, then TLS (bounded by the
    handshake timeout), then HTTP. Everything the transport reports is passed on to the HTTP
    protocol once it is attached; data that arrives before that is kept for it."""

    def __init__(self, server: AsgiServer, http: _BoundedH11) -> None:
        self._server, self._http = server, http
        self._peer: str | None = None  # set while the connection holds a slot
        self._plain: asyncio.Transport | None = None
        self._attached = False
        self._early: list[bytes] = []
        self._handshake: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if peername else "?"
        plain = cast(asyncio.Transport, transport)
        if not self._server.connections.admit(peer):
            plain.abort()
            self._server.note_refused(peer)
            return
        self._peer, self._plain = peer, plain
        self._server.admitted.add(self)
        if self._server.ssl_context is None:
            self._attach(plain)
            return
        plain.pause_reading()  # nothing is read until start_tls owns the transport
        self._handshake = asyncio.get_running_loop().create_task(self._start_tls(plain))

    async def _start_tls(self, plain: asyncio.Transport) -> None:
        limits, context = self._server.limits, self._server.ssl_context
        assert context is not None
        try:
            tls = await asyncio.get_running_loop().start_tls(
                plain,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=limits.tls_handshake_timeout_seconds,
                ssl_shutdown_timeout=limits.tls_handshake_timeout_seconds,
            )
        except Exception as exc:  # a failed or timed-out handshake: the connection is gone
            log.debug("TLS handshake with %s failed: %s", self._peer, exc)
            plain.abort()
            self._release()
            return
        if tls is None or tls.is_closing():
            self._release()
            return
        self._attach(tls)

    def _attach(self, transport: asyncio.Transport) -> None:
        self._attached = True
        self._http.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self._http.data_received(data)

    def _release(self) -> None:
        if self._peer is not None:
            self._server.connections.release(self._peer)
            self._server.admitted.discard(self)
            self._peer = None

    def abort(self) -> None:
        """Server shutdown: a connection still open after the graceful part is not waited for."""
        if self._handshake is not None and not self._handshake.done():
            self._handshake.cancel()
        if self._plain is not None:
            self._plain.abort()  # the TCP connection under TLS too: no close_notify to wait for

    def data_received(self, data: bytes) -> None:
        if self._attached:
            self._http.data_received(data)
        else:
            self._early.append(data)

    def eof_received(self) -> None:
        if self._attached:
            self._http.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self._attached:
            self._http.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._attached:
            self._http.pause_writing()

    def resume_writing(self) -> None:
        if self._attached:
            self._http.resume_writing()


class AsgiServer:
    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self.limits = limits or ServerLimits()
        self.ssl_context = ssl_context
        self.connections = ConnectionCounter(self.limits)
        self.admitted: set[_Admission] = set()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(128)
        self._socket.setblocking(False)
        self.port: int = self._socket.getsockname()[1]
        scheme = "https" if ssl_context else "http"
        self.url = f"{scheme}://{host}:{self.port}"
        request_timeout = self.limits.request_timeout_seconds

        class Http(_BoundedH11):
            pass

        Http.request_timeout = request_timeout

        def protocol(**kwargs: Any) -> _Admission:  # what uvicorn calls for each accepted connection
            return _Admission(self, Http(**kwargs))

        config = uvicorn.Config(
            BodyLimit(app, self.limits.max_body_bytes),
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=cast(Any, protocol),
            ws="none",
            timeout_keep_alive=cast(int, self.limits.keep_alive_timeout_seconds),  # a float works
            h11_max_incomplete_event_size=self.limits.max_header_bytes,
            limit_concurrency=self.limits.max_connections + 1,  # a backstop: the admission caps first
        )
        self._server = _NoSignals(config)
        self._task: asyncio.Task[None] | None = None
        self._refusals_logged_at = -_REFUSAL_LOG_SECONDS

    def note_refused(self, peer: str) -> None:
        """One warning a minute at most while connections are refused at the caps (a flood
        must not also flood the log)."""
        now = asyncio.get_running_loop().time()
        if now - self._refusals_logged_at < _REFUSAL_LOG_SECONDS:
            return
        self._refusals_logged_at = now
        counter = self.connections
        log.warning(
            "%s: connection from %s refused: %d open (cap %d), %d from that address (cap %d); "
            "%d refused since start",
            self.url,
            peer,
            counter.open,
            self.limits.max_connections,
            counter.by_peer[peer],
            self.limits.max_connections_per_peer,
            counter.refused,
        )

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop serving: graceful for 5 s, then cut. A stream that never ends (``logs -f``) must
        not make shutdown raise: the service's SIGTERM path runs this in its ``finally``."""
        self._server.should_exit = True
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout=5)
            except asyncio.CancelledError:
                pass
            except TimeoutError:
                log.warning("%s: connections still open after 5s; closing them", self.url)
        for connection in list(self.admitted):
            connection.abort()
        self._socket.close()
