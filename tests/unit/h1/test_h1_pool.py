"""``vkprovider.h1.Pool`` against a scripted server on 127.0.0.1 that answers byte for byte what
each test says: reuse, the idempotent-only retry, timeouts and cancellation, limits, bad answers."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from tests.support import eventually
from vkprovider.h1 import Disconnected, Pool, ProtocolError

Script = Callable[["Exchange"], Awaitable[None]]


@dataclass
class Exchange:
    """One request as the server read it, and the connection to answer on."""

    server: Server
    connection: int
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    writer: asyncio.StreamWriter

    async def answer(self, raw: bytes) -> None:
        self.writer.write(raw)
        await self.writer.drain()

    def hang_up(self) -> None:
        self.writer.close()


def ok(body: bytes = b'{"ok":true}', *, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


@dataclass
class Server:
    script: Script
    requests: list[Exchange] = field(default_factory=list)
    connections: int = 0
    closed: int = 0  #: connections that ended (EOF or reset) from the client's side or ours
    in_flight: int = 0
    most_in_flight: int = 0
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *lines = head.decode().split("\r\n")
                method, target, _ = line.split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                exchange = Exchange(self, number, method, target, headers, body, writer)
                self.requests.append(exchange)
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
                try:
                    await self.script(exchange)
                finally:
                    self.in_flight -= 1
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.closed += 1
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Script], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> Server:
        state = Server(script)
        server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
        state.port = server.sockets[0].getsockname()[1]
        servers.append(server)
        return state

    yield start
    for server in servers:
        server.close()


async def answer_ok(exchange: Exchange) -> None:
    await exchange.answer(ok())


async def test_a_connection_is_reused_and_the_request_is_what_was_asked(
    serve: Callable[[Script], Awaitable[Server]],
) -> None:
    server = await serve(answer_ok)
    pool = Pool("127.0.0.1", server.port)
    try:
        first = await pool.request("POST", "/api/v1/x?a=1", [("X-Test", "yes")], b'{"a":1}', timeout=5)
        second = await pool.request("GET", "/api/v1/y", timeout=5)
    finally:
        await pool.close()
    assert (first.status, first.body, second.body) == (200, b'{"ok":true}', b'{"ok":true}')
    assert first.header(b"content-length") == b"11"
    assert server.connections == 1 and pool.opened == 1
    post, get = server.requests
    assert (post.method, post.target, post.body) == ("POST", "/api/v1/x?a=1", b'{"a":1}')
    assert post.headers["host"] == f"127.0.0.1:{server.port}" and post.headers["x-test"] == "yes"
    assert (get.method, get.target, get.body) == ("GET", "/api/v1/y", b"")


async def test_chunked_and_gzip_answers_are_decoded(serve: Callable[[Script], Awaitable[Server]]) -> None:
    payload = b'{"items":[' + b",".join(b'{"n":%d}' % i for i in range(2000)) + b"]}"
    packed = gzip.compress(payload)

    async def chunked_gzip(exchange: Exchange) -> None:
        chunks = [packed[i : i + 1000] for i in range(0, len(packed), 1000)]
        raw = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        await exchange.answer(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + raw
        )

    server = await serve(chunked_gzip)
    pool = Pool("127.0.0.1", server.port)
    try:
        answer = await pool.request("GET", "/list", timeout=5)
        again = await pool.request("GET", "/list", timeout=5)
    finally:
        await pool.close()
    assert answer.body == payload and again.body == payload
    assert server.connections == 1


async def test_connection_close_is_honoured(serve: Callable[[Script], Awaitable[Server]]) -> None:
    async def closing(exchange: Exchange) -> None:
        await exchange.answer(ok(extra=b"Connection: close\r\n"))
        exchange.hang_up()

    server = await serve(closing)
    pool = Pool("127.0.0.1", server.port)
    try:
        for _ in range(3):
            assert (await pool.request("GET", "/", timeout=5)).status == 200
    finally:
        await pool.close()
    assert server.connections == 3


def dies_on_second_request(exchange: Exchange) -> Awaitable[None]:
    """Answers a connection's first request; reads the next one and hangs up without a byte:
    an idle close racing the client's reuse (or a server dying mid-request)."""

    async def act() -> None:
        if sum(1 for r in exchange.server.requests if r.connection == exchange.connection) > 1:
            exchange.hang_up()
        else:
            await exchange.answer(ok())

    return act()


async def test_an_idempotent_request_on_a_dead_reused_connection_is_retried_once(
    serve: Callable[[Script], Awaitable[Server]],
) -> None:
    server = await serve(dies_on_second_request)
    pool = Pool("127.0.0.1", server.port)
    try:
        await pool.request("GET", "/first", timeout=5)
        answer = await pool.request("DELETE", "/second", timeout=5)
    finally:
        await pool.close()
    assert answer.status == 200
    assert [(r.connection, r.target) for r in server.requests] == [
        (1, "/first"),
        (1, "/second"),
        (2, "/second"),
    ]


@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_non_idempotent_request_is_never_sent_twice(
    serve: Callable[[Script], Awaitable[Server]], method: str
) -> None:
    server = await serve(dies_on_second_request)
    pool = Pool("127.0.0.1", server.port)
    try:
        await pool.request("GET", "/first", timeout=5)
        with pytest.raises(Disconnected) as caught:
            await pool.request(method, "/second", body=b"{}", timeout=5)
        assert not caught.value.received
        # the pool goes on with a new connection
        assert (await pool.request(method, "/third", body=b"{}", timeout=5)).status == 200
    finally:
        await pool.close()
    assert [(r.connection, r.method, r.target) for r in server.requests] == [
        (1, "GET", "/first"), (1, method, "/second"), (2, method, "/third"),
    ]  # fmt: skip


async def test_a_fresh_connection_that_dies_is_not_retried(
    serve: Callable[[Script], Awaitable[Server]],
) -> None:
    async def hang_up(exchange: Exchange) -> None:
        exchange.hang_up()

    server = await serve(hang_up)
    pool = Pool("127.0.0.1", server.port)
    try:
        with pytest.raises(Disconnected):
            await pool.request("GET", "/", timeout=5)
    finally:
        await pool.close()
    assert len(server.requests) == 1


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_an_unanswered_exchange_closes_its_connection(
    serve: Callable[[Script], Awaitable[Server]], how: str
) -> None:
    release = asyncio.Event()

    async def slow_first(exchange: Exchange) -> None:
        if len(exchange.server.requests) == 1:
            await release.wait()
        await exchange.answer(ok())

    server = await serve(slow_first)
    pool = Pool("127.0.0.1", server.port)
    try:
        if how == "timeout":
            with pytest.raises(TimeoutError):
                await pool.request("GET", "/slow", timeout=0.2)
        else:
            task = asyncio.create_task(pool.request("GET", "/slow", timeout=30))
            await eventually(lambda: _true(server.requests), timeout=5, interval=0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        async def first_closed() -> bool:
            return server.closed >= 1

        release.set()
        await eventually(first_closed, timeout=5, interval=0.01)  # never reused: its answer is unknown
        answer = await pool.request("GET", "/next", timeout=5)
    finally:
        await pool.close()
    assert answer.status == 200
    assert [r.connection for r in server.requests] == [1, 2]


async def _true(value: object) -> bool:
    return bool(value)


async def test_no_more_than_limit_exchanges_at_once(serve: Callable[[Script], Awaitable[Server]]) -> None:
    release = asyncio.Event()

    async def held(exchange: Exchange) -> None:
        await release.wait()
        await exchange.answer(ok())

    server = await serve(held)
    pool = Pool("127.0.0.1", server.port, limit=2)
    try:
        calls = [asyncio.create_task(pool.request("GET", f"/{i}", timeout=10)) for i in range(6)]

        async def two_waiting() -> bool:
            return server.in_flight == 2

        await eventually(two_waiting, timeout=5, interval=0.01)
        await asyncio.sleep(0.05)  # give a third connection the chance to (wrongly) open
        in_flight_while_held = server.in_flight
        release.set()
        answers = await asyncio.gather(*calls)
    finally:
        await pool.close()
    assert in_flight_while_held == 2
    assert [a.status for a in answers] == [200] * 6
    assert server.most_in_flight == 2 and server.connections == 2


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\nContent-Length: 0\r\n\r\n", "headers over"),
        (ok(b"x" * 2_000), "body over"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
            % (len(gzip.compress(b"0" * 100_000)), gzip.compress(b"0" * 100_000)),
            "body over",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 0\r\n\r\n", "Content-Encoding"),
        (b"SPDY/9 what\r\n\r\n", "malformed"),
    ],
    ids=["headers", "body", "gzip-bomb", "encoding", "garbage"],
)
async def test_answers_beyond_the_limits_or_not_http_fail_the_exchange(
    serve: Callable[[Script], Awaitable[Server]], raw: bytes, message: str
) -> None:
    async def bad_then_good(exchange: Exchange) -> None:
        await exchange.answer(raw if len(exchange.server.requests) == 1 else ok())

    server = await serve(bad_then_good)
    pool = Pool("127.0.0.1", server.port, max_body_bytes=1_000)
    try:
        with pytest.raises(ProtocolError, match=message):
            await pool.request("GET", "/", timeout=5)
        answer = await pool.request("GET", "/", timeout=5)
    finally:
        await pool.close()
    assert answer.status == 200 and [r.connection for r in server.requests] == [1, 2]


async def test_bytes_nobody_asked_for_end_the_connection(
    serve: Callable[[Script], Awaitable[Server]],
) -> None:
    async def answer_twice(exchange: Exchange) -> None:
        await exchange.answer(ok() + ok(b"smuggled"))

    server = await serve(answer_twice)
    pool = Pool("127.0.0.1", server.port)
    try:
        first = await pool.request("GET", "/a", timeout=5)
        second = await pool.request("GET", "/b", timeout=5)
    finally:
        await pool.close()
    assert first.body == second.body == b'{"ok":true}'
    assert [r.connection for r in server.requests] == [1, 2]


async def test_request_lines_and_headers_cannot_be_split(
    serve: Callable[[Script], Awaitable[Server]],
) -> None:
    server = await serve(answer_ok)
    pool = Pool("127.0.0.1", server.port)
    try:
        with pytest.raises(ValueError, match="CR, LF"):
            await pool.request("GET", "/", [("X-A", "b\r\nX-Injected: 1")], timeout=5)
        await pool.request("GET", "/a b\r\nX-Injected: 1", timeout=5)
    finally:
        await pool.close()
    (only,) = server.requests
    assert only.target == "/a%20b%0D%0AX-Injected:%201" and "x-injected" not in only.headers


async def test_idle_connections_are_closed_after_the_keepalive(
    serve: Callable[[Script], Awaitable[Server]],
) -> None:
    server = await serve(answer_ok)
    pool = Pool("127.0.0.1", server.port, keepalive_seconds=0.1)
    try:
        await pool.request("GET", "/", timeout=5)

        async def closed() -> bool:
            return server.closed == 1

        await eventually(closed, timeout=5, interval=0.02)
        await pool.request("GET", "/", timeout=5)
    finally:
        await pool.close()
    assert server.connections == 2
