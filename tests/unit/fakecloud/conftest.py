"""Fixtures: a real fakecloud server on 127.0.0.1 per test, an adapter and an admin client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fakecloud_helpers import config
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import FakeCloudServer, running_fakecloud


@pytest.fixture
async def server() -> AsyncIterator[FakeCloudServer]:
    async with running_fakecloud(config()) as running:
        yield running


@pytest.fixture
async def provider(server: FakeCloudServer) -> AsyncIterator[FakeCloudProvider]:
    adapter = FakeCloudProvider("cheap", FakeCloudProvider.Settings(url=server.url, timeout_seconds=2.0))
    yield adapter
    await adapter.close()


@pytest.fixture
async def admin(server: FakeCloudServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url + "/admin", timeout=5.0) as client:
        yield client
