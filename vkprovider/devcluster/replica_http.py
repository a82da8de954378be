"""The replicas' HTTP answer and the load generator's request: one GET, one JSON body, then close.

Both ends run on sockets made inside a network namespace (:mod:`netns_socket`), which httpx and
uvicorn do not accept for a client, and which would cost a uvicorn server per replica address;
the exchange here is the smallest HTTP/1.1 both sides need. Every request uses a new connection
(``Connection: close``), so kube-proxy picks an endpoint per request, as it does per connection.

``GET /slow?ms=N`` answers after N milliseconds (at most :data:`MAX_SLOW_MS`, at most
:data:`MAX_SLOW_REQUESTS` at once per listener, a 503 beyond): a long request in flight, what
draining must let finish (tests/integration/test_data_path_drain.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_HEADER_BYTES = 16384
#: The longest delay ``/slow`` grants, and how many slow requests one listener holds at once.
MAX_SLOW_MS = 30_000
MAX_SLOW_REQUESTS = 32


def slow_ms(request_line: str) -> int | None:
    """The delay a ``GET /slow?ms=N`` request line asks for, capped (None: not a slow request;
    a missing or malformed ``ms`` is 0)."""
    parts = request_line.split(" ")
    if len(parts) < 2:
        return None
    url = urlsplit(parts[1])
    if url.path != "/slow":
        return None
    try:
        asked = int(parse_qs(url.query).get("ms", ["0"])[0])
    except ValueError:
        asked = 0
    return min(max(asked, 0), MAX_SLOW_MS)


def _response(status: str, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


async def serve(sock: socket.socket, answer: Callable[[], Awaitable[dict[str, Any]]]) -> asyncio.Server:
    """Serve ``answer()`` as a JSON 200 to every request on the listening ``sock`` (after the
    delay a ``/slow`` request asks for)."""
    slow = asyncio.Semaphore(MAX_SLOW_REQUESTS)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(30 + MAX_SLOW_MS / 1000):
                head = await reader.readuntil(b"\r\n\r\n")
                delay = slow_ms(head.split(b"\r\n", 1)[0].decode("latin-1"))
                if delay:
                    if slow.locked():
                        writer.write(
                            _response("503 Service Unavailable", b'{"error": "too many slow requests"}')
                        )
                        await writer.drain()
                        return
                    async with slow:
                        await asyncio.sleep(delay / 1000)
                body = json.dumps(await answer()).encode()
                writer.write(_response("200 OK", body))
                await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.start_server(handle, sock=sock, limit=MAX_HEADER_BYTES)


class BadResponse(OSError):
    """Not a 200 with a JSON object body."""


async def get(sock: socket.socket, host: str, port: int, path: str = "/") -> dict[str, Any]:
    """Connect the unconnected ``sock`` to ``host:port``, GET ``path``, return the JSON body."""
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_HEADER_BYTES)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status = head.split(" ", 2)
        if len(status) < 2 or status[1] != "200":
            raise BadResponse(f"status line {head.splitlines()[0]!r}")
        body = json.loads(await reader.read())
        if not isinstance(body, dict):
            raise BadResponse("body is not a JSON object")
        return body
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise BadResponse(str(exc)) from None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
