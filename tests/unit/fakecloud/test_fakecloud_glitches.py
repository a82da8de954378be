"""Glitch knobs: the workload is fine, the API misreports it (lists that omit or say Unknown,
asynchronous deletes, watches that end); ``get`` tells the truth."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fakecloud_helpers import NODE, request
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import FakeCloudServer

from vkprovider.plugins.api import NotFound, Phase, Transient


async def serving(provider: FakeCloudProvider, server: FakeCloudServer, uid: str) -> None:
    await provider.deploy(request(uid))
    server.store.skip_to(uid, "serving")


async def test_a_list_omits_live_deployments_that_get_still_finds(
    provider: FakeCloudProvider, server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    await serving(provider, server, "u1")
    await admin.patch("/knobs", json={"list_omit_rate": 1.0})
    assert await provider.list(NODE) == []
    assert (await provider.get("u1")).phase is Phase.RUNNING
    assert (await admin.get("/stats")).json()["glitches"]["omitted"] == 1
    await admin.patch("/knobs", json={"list_omit_rate": 0.0})
    assert [s.uid for s in await provider.list(NODE)] == ["u1"]


async def test_a_list_reports_unknown_while_get_answers_running(
    provider: FakeCloudProvider, server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    await serving(provider, server, "u1")
    await admin.patch("/knobs", json={"unknown_rate": 1.0})
    (listed,) = await provider.list(NODE)
    assert listed.phase is Phase.UNKNOWN
    assert (await provider.get("u1")).phase is Phase.RUNNING


async def test_an_asynchronous_delete_is_still_reported_then_gone(
    provider: FakeCloudProvider, server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    await serving(provider, server, "u1")
    await admin.patch("/knobs", json={"delete_delay_seconds": 0.3})
    assert await provider.delete("u1") is None  # 202, in flight: not "gone", the service asks get
    assert await provider.delete("u1") is None  # and again while it still is
    assert "u1" not in server.store.deployments  # no longer live, no longer billing
    assert [s.uid for s in await provider.list(NODE)] == ["u1"]  # but still reported
    assert (await provider.get("u1")).phase is Phase.RUNNING
    await asyncio.sleep(0.4)
    assert await provider.list(NODE) == []
    with pytest.raises(NotFound):
        await provider.get("u1")
    assert await provider.delete("u1") is True  # now the answer is 204: gone


async def test_a_run_deleted_before_its_end_never_reports_that_end(
    provider: FakeCloudProvider, server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    """A deleted run stopped at the delete (the ledger says ``deleted``): while the delete is
    still in flight it must not go on to report its natural exit 0, or a client would count an
    interrupted Job pod as a completion (the chaos run's miscounted completion)."""
    await serving(provider, server, "u1")
    store = server.store
    now = [store.clock()]
    store.clock = lambda: now[0]  # the cloud's time moves only when the test says (no race with load)
    deployment = store.deployments["u1"]
    ran = now[0] - deployment.created - store.config.lifecycle.provisioning_seconds
    deployment.run_seconds = ran + 10.0  # exit 0 in 10 s of the cloud's time, unless deleted first
    await admin.patch("/knobs", json={"delete_delay_seconds": 100.0})
    await provider.delete("u1")
    now[0] += 20.0  # past the natural end, the delete still in flight
    reported = await provider.get("u1")
    assert reported.phase is Phase.RUNNING, reported
    (listed,) = await provider.list(NODE)
    assert listed.phase is Phase.RUNNING
    (entry,) = (await admin.get("/ledger")).json()["entries"]
    assert entry["end_reason"] == "deleted"


async def test_a_watch_ends_after_watch_max_seconds(
    provider: FakeCloudProvider, server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    await serving(provider, server, "u1")
    await admin.patch("/knobs", json={"watch_max_seconds": 0.2})
    seen: list[str] = []
    with pytest.raises(Transient, match="watch stream ended"):  # the client must reopen it
        async for status in provider.watch(NODE):
            seen.append(status.uid)
    assert seen == ["u1"]
    assert (await admin.get("/stats")).json()["glitches"]["watch_ended"] == 1
