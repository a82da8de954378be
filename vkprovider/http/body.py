"""A cap on request bodies, for every server (:class:`vkprovider.http.server.AsgiServer`).

Nothing is buffered here: a declared ``Content-Length`` over the cap is answered 413 before the
app (and before authentication) runs; a body without one (chunked) is counted as the app reads
it, and the read that crosses the cap raises a 413 ``HTTPException`` inside the app, so the
route's own error handler answers it (``POST /explain`` reads its body whole, and would
otherwise read any size).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _too_large(limit: int) -> str:
    return f"request body too large: the limit is {limit} bytes"


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _plain(send, 413, _too_large(self.limit))
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:  # read outside a route's error handling
            if not started:
                await _plain(send, 413, _too_large(self.limit))


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses a malformed length before the app is called
    return None


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    start: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
