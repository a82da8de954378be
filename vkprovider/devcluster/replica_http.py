"""The replicas' HTTP answer and the load generator's request: one GET, one JSON body, then close.

Both ends run on sockets made inside a network namespace (:mod:`netns_socket`), which httpx and
uvicorn do not accept for a client, and which would cost a uvicorn server per replica address;
the exchange here is the smallest HTTP/1.1 both sides need. Every request uses a new connection
(``Connection: close``), so kube-proxy picks an endpoint per request, as it does per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

MAX_HEADER_BYTES = 16384


async def serve(sock: socket.socket, answer: Callable[[], Awaitable[dict[str, Any]]]) -> asyncio.Server:
    """Serve ``answer()`` as a JSON 200 to every request on the listening ``sock``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(30):
                await reader.readuntil(b"\r\n\r\n")
                body = json.dumps(await answer()).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
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
