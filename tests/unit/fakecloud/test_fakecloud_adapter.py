"""The adapter against a real fakecloud server: catalog, idempotent deploys, lifecycle, scoping."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from fakecloud_helpers import NODE, eventually, request
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import FakeCloudServer

from vkprovider.plugins.api import (
    DeploymentStatus,
    NoCapacity,
    NotFound,
    Phase,
    Provider,
    QuotaOrBilling,
    SupportsLogs,
    SupportsWatch,
)


async def test_protocols_info_and_probe(provider: FakeCloudProvider) -> None:
    assert isinstance(provider, Provider | SupportsLogs | SupportsWatch)
    assert isinstance(provider, SupportsLogs) and isinstance(provider, SupportsWatch)
    info = await provider.info()
    assert (info.name, info.adapter, info.capabilities.logs, info.capabilities.watch) == (
        "cheap",
        "fakecloud",
        True,
        True,
    )
    await provider.probe()


async def test_offers_are_normalized_and_named_after_the_instance(provider: FakeCloudProvider) -> None:
    offers = {o.offer_id: o for o in await provider.offers()}
    assert set(offers) == {"a100", "h100"}
    assert offers["h100"].gpu_type == "H100-SXM-80GB" and offers["h100"].gpu_memory_gb == 80
    assert {o.provider for o in offers.values()} == {"cheap"}
    assert (offers["a100"].price_per_hour, offers["a100"].capacity, offers["a100"].region) == (
        1.5,
        2,
        "eu-west",
    )


async def test_deploy_is_idempotent_and_uses_capacity(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    first = await provider.deploy(request("uid-1"))
    second = await provider.deploy(request("uid-1"))
    assert first.uid == second.uid == "uid-1"
    assert first.provider_id == second.provider_id
    assert first.phase is Phase.PENDING and first.node_name == NODE and first.offer_id == "a100"
    assert len((await admin.get("/deployments")).json()) == 1
    capacity = {o.offer_id: o.capacity for o in await provider.offers()}
    assert capacity["a100"] == 1
    assert await provider.delete("uid-1") is True  # 204: gone at once (no get needed)
    assert await provider.delete("uid-1") is True  # unknown now: still succeeds
    assert {o.offer_id: o.capacity for o in await provider.offers()}["a100"] == 2
    with pytest.raises(NotFound):
        await provider.get("uid-1")


async def test_capacity_exhaustion_is_no_capacity(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("h-1", gpu="H100-SXM-80GB"))
    with pytest.raises(NoCapacity) as info:
        await provider.deploy(request("h-2", gpu="H100-SXM-80GB"))
    assert info.value.provider == "cheap"
    with pytest.raises(NoCapacity):
        await provider.deploy(request("t4", gpu="T4-16GB"))  # not in the catalog at all
    assert (await admin.put("/offers/h100/capacity", json={"capacity": 3})).status_code == 200
    assert (await provider.deploy(request("h-2", gpu="H100-SXM-80GB"))).offer_id == "h100"
    await admin.put("/capacity", json={"capacity": 0})
    with pytest.raises(NoCapacity):
        await provider.deploy(request("a-1", offer_id="a100"))


async def test_list_is_scoped_to_the_node_in_one_call(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("mine-1"))
    await provider.deploy(request("mine-2"))
    await provider.deploy(request("theirs", node="other-node", gpu="H100-SXM-80GB"))
    before = (await admin.get("/stats")).json()["requests"].get("GET /v1/deployments", 0)
    listed = await provider.list(NODE)
    after = (await admin.get("/stats")).json()["requests"]["GET /v1/deployments"]
    assert sorted(s.uid for s in listed) == ["mine-1", "mine-2"]
    assert after - before == 1
    assert [s.uid for s in await provider.list("other-node")] == ["theirs"]
    assert await provider.list("nobody") == []


async def test_lifecycle_to_serving_then_finish_and_fail(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("job-1"))
    await provider.deploy(request("job-2"))

    async def serving() -> DeploymentStatus | None:
        status = await provider.get("job-1")
        return status if status.ready else None

    status = await eventually(serving)
    assert status.phase is Phase.RUNNING and status.ip and status.endpoint == f"http://{status.ip}:8000"
    assert status.containers[0].state.value == "running" and status.started_at is not None
    await admin.post("/deployments/job-1/finish", json={"exit_code": 0})
    done = await provider.get("job-1")
    assert (done.phase, done.containers[0].exit_code, done.ready) == (Phase.SUCCEEDED, 0, False)
    await admin.post(
        "/deployments/job-2/fail",
        json={"reason": "OOMKilled", "message": "out of GPU memory", "exit_code": 137},
    )
    failed = await provider.get("job-2")
    assert (failed.phase, failed.reason, failed.message) == (Phase.FAILED, "OOMKilled", "out of GPU memory")
    assert failed.containers[0].exit_code == 137
    # terminal is terminal: a later verb does not rewrite history
    await admin.post("/deployments/job-2/finish", json={"exit_code": 0})
    assert (await provider.get("job-2")).phase is Phase.FAILED


async def test_finish_with_nonzero_exit_code_fails(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("job"))
    await admin.post("/deployments/job/finish", json={"exit_code": 3})
    status = await provider.get("job")
    assert (status.phase, status.reason, status.containers[0].exit_code) == (Phase.FAILED, "Error", 3)


async def test_lost_deployment_vanishes_and_returns_capacity(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("gone"))
    assert (await admin.post("/deployments/gone/lose")).status_code == 200
    with pytest.raises(NotFound):
        await provider.get("gone")
    assert await provider.list(NODE) == []
    assert {o.offer_id: o.capacity for o in await provider.offers()}["a100"] == 2


async def test_request_is_delivered_intact_and_admin_redacts_secrets(
    provider: FakeCloudProvider, admin: httpx.AsyncClient, server: FakeCloudServer
) -> None:
    sent = request("files")
    await provider.deploy(sent)
    assert server.store.deployments["files"].request == sent  # binary file content survived the wire
    described = (await admin.get("/deployments/files")).json()
    env = {e["name"]: e["value"] for e in described["request"]["containers"][0]["env"]}
    assert env == {"MODE": "prod", "TOKEN": "<redacted>"}
    file = described["request"]["containers"][0]["files"][0]
    assert file["sha256"] == hashlib.sha256(b"\x00\xffbinary-key").hexdigest() and "content" not in file
    assert described["labels"]["vkprovider.io/pod-uid"] == "files"
    assert described["labels"]["vkprovider.io/node-name"] == NODE
    assert "s3cret-token" not in (await admin.get("/deployments")).text


async def test_billing_error_is_quota_or_billing(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await admin.patch("/knobs", json={"billing_error": True})
    with pytest.raises(QuotaOrBilling):
        await provider.deploy(request("b"))


async def test_invalid_request_from_server(server: FakeCloudServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        response = await client.post("/v1/deployments", json={"request": {"uid": "x"}})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "InvalidRequest"
    assert "request.namespace" in response.json()["error"]["message"]


async def test_api_key_is_required_when_configured() -> None:
    from fakecloud_helpers import config
    from vkprovider_fakecloud.server import running_fakecloud

    async with running_fakecloud(config(api_key="k3y")) as server:
        good = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, api_key="k3y"))
        bad = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, api_key="wrong"))
        try:
            await good.probe()
            with pytest.raises(QuotaOrBilling):
                await bad.probe()
            assert "k3y" not in repr(good) and "k3y" not in repr(good._settings)
        finally:
            await good.close()
            await bad.close()


async def test_start_and_serve_verbs_skip_the_wait() -> None:
    from fakecloud_helpers import config
    from vkprovider_fakecloud.server import running_fakecloud

    slow = config(lifecycle={"provisioning_seconds": 3600, "serving_after_seconds": 3600})
    async with running_fakecloud(slow) as server:
        adapter = FakeCloudProvider("slow", FakeCloudProvider.Settings(url=server.url))
        async with httpx.AsyncClient(base_url=server.url + "/admin") as slow_admin:
            try:
                await adapter.deploy(request("s"))
                assert (await adapter.get("s")).phase is Phase.PENDING
                await slow_admin.post("/deployments/s/start")
                running = await adapter.get("s")
                assert (running.phase, running.ready) == (Phase.RUNNING, False)
                await slow_admin.post("/deployments/s/serve")
                assert (await adapter.get("s")).ready
            finally:
                await adapter.close()
