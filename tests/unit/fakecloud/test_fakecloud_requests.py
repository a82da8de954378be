"""Requests per operation of the fakecloud adapter on the adapter kit, at the HTTP edge.

The kit looks a deployment up before create, delete, endpoints and logs unless the adapter says
its create is idempotent and its id derived from the UID; fakecloud does, so every operation is
one request by UID. These tests fail if a look-up (or any other request) creeps back in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import pytest
from fakecloud_helpers import request
from vkprovider_fakecloud.adapter import FakeCloudProvider

from vkprovider.plugins.api import LogOptions, NotFound

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]

STATUS = {"uid": "u1", "phase": "Pending", "node_name": "vk-test", "provider_id": "fc-1"}


def _adapter(handler: Handler) -> FakeCloudProvider:
    settings = FakeCloudProvider.Settings(url="http://fake.invalid")
    return FakeCloudProvider("mock", settings, transport=httpx.MockTransport(handler))


class _Cloud:
    """Answers like the fakecloud server and records every request as ``METHOD path``."""

    def __init__(self, *, delete_status: int = 204) -> None:
        self.seen: list[str] = []
        self.delete_status = delete_status

    async def __call__(self, req: httpx.Request) -> httpx.Response:
        self.seen.append(f"{req.method} {req.url.path}")
        if req.method == "DELETE":
            return httpx.Response(self.delete_status)
        if req.url.path.endswith("/logs"):
            return httpx.Response(200, content=b"0123456789" * 10)
        if req.url.path.endswith("/endpoints"):
            return httpx.Response(200, json={"uid": "u1", "addresses": ["10.0.0.1"]})
        return httpx.Response(200, json=STATUS)


async def test_each_operation_is_one_request_by_uid() -> None:
    cloud = _Cloud()
    adapter = _adapter(cloud)
    try:
        assert (await adapter.deploy(request("u1"))).provider_id == "fc-1"
        assert (await adapter.get("u1")).uid == "u1"
        assert (await adapter.endpoints("u1")).addresses == ["10.0.0.1"]
        chunks = [c async for c in adapter.logs("u1", LogOptions(limit_bytes=25))]
        assert await adapter.delete("u1") is True  # 204: gone, no get to confirm
    finally:
        await adapter.close()
    assert b"".join(chunks) == b"0123456789012345678901234"  # cut at limit_bytes by the kit's helper
    assert cloud.seen == [
        "POST /v1/deployments",
        "GET /v1/deployments/u1",
        "GET /v1/deployments/u1/endpoints",
        "GET /v1/deployments/u1/logs",
        "DELETE /v1/deployments/u1",
    ]


@pytest.mark.parametrize("status", [202, 404])
async def test_delete_not_known_gone_answers_none(status: int) -> None:
    cloud = _Cloud(delete_status=status)
    adapter = _adapter(cloud)
    try:
        assert await adapter.delete("u1") is None  # in flight (202) or unknown (404): get confirms
    finally:
        await adapter.close()
    assert cloud.seen == ["DELETE /v1/deployments/u1"]


async def test_get_of_an_object_carrying_another_uid_is_not_found() -> None:
    async def other(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={**STATUS, "uid": "someone-else"})

    adapter = _adapter(other)
    try:
        with pytest.raises(NotFound) as info:
            await adapter.get("u1")
        assert info.value.provider == "mock"
    finally:
        await adapter.close()


async def test_a_delete_waits_for_the_create_of_its_uid_in_flight() -> None:
    seen: list[str] = []
    release = asyncio.Event()

    async def held(req: httpx.Request) -> httpx.Response:
        seen.append(f"start {req.method}")
        if req.method == "POST":
            await release.wait()
        seen.append(f"end {req.method}")
        return httpx.Response(204) if req.method == "DELETE" else httpx.Response(200, json=STATUS)

    adapter = _adapter(held)
    try:
        deploy = asyncio.create_task(adapter.deploy(request("u1")))
        while not seen:
            await asyncio.sleep(0)
        delete = asyncio.create_task(adapter.delete("u1"))
        for _ in range(20):  # give the delete every chance to go out early
            await asyncio.sleep(0)
        release.set()
        await deploy
        assert await delete is True
    finally:
        await adapter.close()
    assert seen == ["start POST", "end POST", "start DELETE", "end DELETE"]
