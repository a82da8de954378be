"""The limits on a plain-HTTP server (the admin API on loopback): the same admission and
deadline as over TLS, in-process, and one warning for refused connections."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

from vkprovider.http.limits import ServerLimits
from vkprovider.http.server import AsgiServer


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout=30)  # a bound against hanging


async def test_caps_deadline_and_refusal_warning_without_tls(caplog: pytest.LogCaptureFixture) -> None:
    app = FastAPI()

    @app.get("/ok")
    async def ok() -> dict[str, bool]:
        return {"ok": True}

    limits = ServerLimits(max_connections=2, max_connections_per_peer=2, request_timeout_seconds=0.5)
    server = AsgiServer(app, "127.0.0.1", 0, limits=limits)
    await server.start()
    writers = []
    try:
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
        writers += [w for _, w in held]
        for _, writer in held:
            writer.write(b"GET /ok HTTP/1.1\r\nHost: a\r\n")  # never finished
        with caplog.at_level(logging.WARNING, logger="vkprovider.http.server"):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writers.append(writer)
            assert await _read_all(reader) == b""  # past the cap: closed without a word
        assert any("refused" in r.getMessage() and "cap 2" in r.getMessage() for r in caplog.records)
        for reader, _ in held:
            answer = await _read_all(reader)
            assert answer.startswith(b"HTTP/1.1 408") and b"within 0.5s" in answer
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)  # slots free again
        writers.append(writer)
        writer.write(b"GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        assert b'{"ok":true}' in await _read_all(reader)
    finally:
        for writer in writers:
            writer.close()
        await server.stop()


async def test_a_stream_that_never_ends_does_not_make_stop_raise(caplog: pytest.LogCaptureFixture) -> None:
    """``kubectl logs -f`` holds a response open forever; stopping the server (SIGTERM) cuts it
    after the grace instead of raising TimeoutError out of the service's shutdown."""
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    async def forever() -> AsyncIterator[bytes]:
        while True:
            yield b"line\n"
            await asyncio.sleep(0.1)

    @app.get("/follow")
    async def follow() -> StreamingResponse:
        return StreamingResponse(forever())

    server = AsgiServer(app, "127.0.0.1", 0)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /follow HTTP/1.1\r\nHost: a\r\n\r\n")
        assert (await asyncio.wait_for(reader.readline(), timeout=30)).startswith(b"HTTP/1.1 200")
        with caplog.at_level(logging.WARNING, logger="vkprovider.http.server"):
            await server.stop()  # returns; the stream is cut
        assert any("closing them" in r.getMessage() for r in caplog.records)
        assert (await _read_all(reader)).count(b"line") >= 1
    finally:
        writer.close()
