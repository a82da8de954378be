"""The shared-loop guard (tests/loop_hygiene.py) finds a server a test left running and stops it."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from tests.loop_hygiene import LeakedServerWarning, running_servers, stop_leaked
from vkprovider.http.server import AsgiServer


async def test_a_server_left_running_is_named_and_stopped() -> None:
    before = set(running_servers())
    server = AsgiServer(FastAPI(), "127.0.0.1", 0)
    await server.start()
    async with httpx.AsyncClient() as client:  # it serves until the guard steps in
        assert (await client.get(f"{server.url}/nothing")).status_code == 404
    with pytest.warns(LeakedServerWarning, match="test-id left a uvicorn server running"):
        stopped = await stop_leaked(before, "test-id")
    assert len(stopped) == 1
    assert not set(running_servers()) - before
    with pytest.raises(httpx.TransportError):
        async with httpx.AsyncClient() as client:
            await client.get(f"{server.url}/nothing", timeout=2)
    await server.stop()  # the owner's own stop still works after the guard's


async def test_a_server_stopped_by_its_test_is_left_alone() -> None:
    before = set(running_servers())
    server = AsgiServer(FastAPI(), "127.0.0.1", 0)
    await server.start()
    await server.stop()
    await asyncio.sleep(0)
    assert await stop_leaked(before, "test-id") == []
