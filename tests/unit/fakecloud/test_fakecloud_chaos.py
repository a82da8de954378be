"""Chaos knobs on the admin endpoint and how the adapter classifies each failure."""

from __future__ import annotations

import httpx
import pytest
from fakecloud_helpers import config, request
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import FakeCloudServer, running_fakecloud

from vkprovider.plugins.api import NoCapacity, NotFound, Transient


async def test_server_errors_are_transient(provider: FakeCloudProvider, admin: httpx.AsyncClient) -> None:
    await admin.patch("/knobs", json={"error_rate": 1.0, "error_status": 502})
    with pytest.raises(Transient) as info:
        await provider.offers()
    assert "502" in str(info.value) and info.value.provider == "cheap"


async def test_rate_limit_carries_retry_after(provider: FakeCloudProvider, admin: httpx.AsyncClient) -> None:
    await admin.patch("/knobs", json={"rate_limit_rate": 1.0, "retry_after_seconds": 7})
    with pytest.raises(Transient) as info:
        await provider.deploy(request("r"))
    assert info.value.retry_after == 7


async def test_hang_longer_than_client_timeout_is_transient(
    server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    await admin.patch("/knobs", json={"timeout_rate": 1.0, "hang_seconds": 0.5})
    impatient = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, timeout_seconds=0.1))
    try:
        with pytest.raises(Transient, match="timed out"):
            await impatient.probe()
    finally:
        await impatient.close()


async def test_outage_fails_everything_but_admin(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("before"))
    await admin.patch("/knobs", json={"outage": True})
    for call in (provider.probe(), provider.offers(), provider.list("vk-test"), provider.get("before")):
        with pytest.raises(Transient):
            await call
    assert (await admin.get("/knobs")).json()["outage"] is True
    await admin.patch("/knobs", json={"outage": False})
    await provider.probe()
    assert (await provider.get("before")).uid == "before"  # an outage does not lose deployments


async def test_connection_refused_is_transient(server: FakeCloudServer) -> None:
    dead = FakeCloudProvider("dead", FakeCloudProvider.Settings(url="http://127.0.0.1:9", timeout_seconds=1))
    try:
        with pytest.raises(Transient, match="unreachable"):
            await dead.probe()
    finally:
        await dead.close()


async def test_loss_rate_makes_deployments_vanish(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("l1"))
    await admin.patch("/knobs", json={"loss_rate": 1.0})
    with pytest.raises(NotFound):
        await provider.get("l1")
    await admin.patch("/knobs", json={"loss_rate": 0.0})
    assert await provider.list("vk-test") == []


async def test_chaos_can_target_paths_and_methods(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await admin.patch("/knobs", json={"error_rate": 1.0, "paths": ["/v1/deployments"], "methods": ["POST"]})
    await provider.offers()
    await provider.list("vk-test")
    with pytest.raises(Transient):
        await provider.deploy(request("x"))


async def test_knob_validation_and_reset(admin: httpx.AsyncClient, provider: FakeCloudProvider) -> None:
    bad = await admin.patch("/knobs", json={"error_rate": 2})
    assert bad.status_code == 422 and "error_rate" in bad.json()["error"]["message"]
    unknown = await admin.patch("/knobs", json={"eror_rate": 0.5})
    assert unknown.status_code == 422 and "eror_rate" in unknown.json()["error"]["message"]
    await admin.patch("/knobs", json={"outage": True})
    await admin.post("/reset", json={"seed": 3})
    assert (await admin.get("/knobs")).json()["outage"] is False
    await provider.probe()


async def _outcomes(seed: int) -> list[str]:
    """The sequence of error classes a seeded, half-broken server produces."""
    async with running_fakecloud(
        config(seed=seed, knobs={"error_rate": 0.4, "rate_limit_rate": 0.2})
    ) as server:
        adapter = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url))
        result = []
        try:
            for _ in range(25):
                try:
                    await adapter.offers()
                    result.append("ok")
                except Transient as exc:
                    result.append("429" if exc.retry_after is not None else "5xx")
        finally:
            await adapter.close()
        return result


async def test_seeded_chaos_is_reproducible() -> None:
    first, second, other = await _outcomes(11), await _outcomes(11), await _outcomes(12)
    assert first == second
    assert {"ok", "5xx", "429"} <= set(first)
    assert first != other


async def test_rules_fail_the_next_call_of_one_route(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    rule = {
        "method": "GET",
        "path": "/v1/deployments/{uid}",
        "status": 409,
        "message": "sold out",
        "times": 1,
    }
    created = (await admin.post("/rules", json=rule)).json()
    assert created["code"] == "" and created["id"]
    await provider.deploy(request("r1"))  # other routes are untouched
    with pytest.raises(NoCapacity, match="sold out"):
        await provider.get("r1")
    assert (await provider.get("r1")).uid == "r1"  # one-shot: expired after one hit
    assert (await admin.get("/rules")).json() == []


async def test_delay_rule_counts_hits_and_returns_them_on_removal(
    server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    rule = (await admin.post("/rules", json={"path": "/v1/offers", "delay_seconds": 0.5})).json()
    impatient = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, timeout_seconds=0.1))
    try:
        with pytest.raises(Transient, match="timed out"):
            await impatient.offers()
        await impatient.probe()  # /v1/health is not delayed
    finally:
        await impatient.close()
    removed = (await admin.delete(f"/rules/{rule['id']}")).json()
    assert removed["hits"] == 1
    assert (await admin.delete(f"/rules/{rule['id']}")).status_code == 404
