"""The billing ledger, timed outages, ambiguous creates and per-instance pod IP ranges."""

from __future__ import annotations

import asyncio
import ipaddress

import httpx
import pytest
from fakecloud_helpers import config, request
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.ledger import LedgerEntry, overlaps, spend
from vkprovider_fakecloud.server import FakeCloudServer, running_fakecloud
from vkprovider_fakecloud.state import Store, ip_network

from tests.support import eventually
from vkprovider.plugins.api import Phase, Transient


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_ledger_bills_from_create_to_delete(
    provider: FakeCloudProvider, admin: httpx.AsyncClient, server: FakeCloudServer
) -> None:
    await provider.deploy(request("a"))
    await provider.deploy(request("a"))  # idempotent: still one bill
    first = (await admin.get("/ledger")).json()
    [entry] = first["entries"]
    assert entry["uid"] == "a" and entry["ended_at"] is None and entry["provider"] == "fc-test"
    assert entry["instance"] == str(server.port)
    assert (entry["offer_id"], entry["gpu_type"], entry["gpus"], entry["price_per_hour"]) == (
        "a100",
        "A100-SXM-80GB",
        1,
        1.5,
    )
    assert entry["started_at"] <= first["now"]
    await provider.delete("a")
    [ended] = (await admin.get("/ledger")).json()["entries"]
    assert ended["ended_at"] is not None and ended["end_reason"] == "deleted"
    assert ended["started_at"] <= ended["ended_at"]


def test_ledger_ends_at_the_terminal_moment_not_at_the_delete() -> None:
    clock = Clock()
    store = Store(config(lifecycle={"provisioning_seconds": 1, "run_seconds": 10}), clock)
    deployment, _ = store.create(request("job"), {})
    clock.now += 100  # finished at +11 s, deleted much later
    [live] = store.bills()
    assert live.ended_at == pytest.approx(store.wall(deployment.created + 11))
    assert live.end_reason == "Completed"
    store.remove("job")
    [entry] = store.bills()
    assert entry.ended_at == pytest.approx(store.wall(deployment.created + 11))
    assert entry.cost(store.wall()) == pytest.approx(1.5 * 11 / 3600)


def test_lost_deployment_stops_billing_and_reset_forgets() -> None:
    clock = Clock()
    store = Store(config(), clock)
    store.create(request("x"), {})
    clock.now += 7
    store.remove("x", lost=True)
    [entry] = store.bills()
    assert entry.end_reason == "lost" and entry.ended_at - entry.started_at == pytest.approx(7)
    store.reset()
    assert store.bills() == []


def _entry(uid: str, provider: str, start: float, end: float | None) -> LedgerEntry:
    return LedgerEntry(
        uid=uid,
        deployment_id=f"{provider}-{start}",
        provider=provider,
        offer_id="o",
        gpu_type="H100-SXM-80GB",
        gpus=1,
        price_per_hour=3600.0,
        started_at=start,
        ended_at=end,
    )


def test_overlaps_finds_twins_across_instances_and_not_successors() -> None:
    entries = [
        _entry("u1", "cheap", 0, 10),
        _entry("u1", "premium", 10, 20),  # a replacement after the first ended: fine
        _entry("u2", "cheap", 0, None),
        _entry("u2", "premium", 5, 8),  # twin while the first was live
        _entry("u3", "cheap", 0, 100),
        _entry("u3", "cheap", 1, 2),
        _entry("u3", "premium", 50, None),  # both overlap the long first one
    ]
    found = {(o.uid, o.second.provider, o.since, o.until) for o in overlaps(entries)}
    assert found == {("u2", "premium", 5, 8), ("u3", "cheap", 1, 2), ("u3", "premium", 50, 100)}
    assert "both live" in overlaps(entries)[0].describe()
    assert spend(entries[:2], now=30) == pytest.approx(20.0)


async def test_timed_outage_ends_by_itself(provider: FakeCloudProvider, admin: httpx.AsyncClient) -> None:
    response = await admin.post("/outage", json={"seconds": 0.3})
    assert response.status_code == 200
    with pytest.raises(Transient, match="outage"):
        await provider.probe()

    async def back() -> bool:
        try:
            await provider.probe()
        except Transient:
            return False
        return True

    await eventually(back, timeout=5, interval=0.05)
    assert (await admin.post("/outage", json={"seconds": -1})).status_code == 422


async def test_hanging_outage_looks_like_a_timeout(server: FakeCloudServer, admin: httpx.AsyncClient) -> None:
    await admin.patch("/knobs", json={"hang_seconds": 5})
    await admin.post("/outage", json={"seconds": 5, "mode": "hang"})
    impatient = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, timeout_seconds=0.2))
    try:
        with pytest.raises(Transient, match="timed out"):
            await impatient.probe()
    finally:
        await impatient.close()
        await admin.delete("/outage")


async def test_ambiguous_create_happens_but_answers_an_error(
    provider: FakeCloudProvider, admin: httpx.AsyncClient, server: FakeCloudServer
) -> None:
    await admin.patch("/knobs", json={"ambiguous_create_rate": 1.0, "ambiguous_status": 502})
    with pytest.raises(Transient, match="502"):
        await provider.deploy(request("maybe"))
    assert "maybe" in server.store.deployments  # it happened
    await admin.patch("/knobs", json={"ambiguous_create_rate": 0.0})
    status = await provider.get("maybe")
    assert status.phase in (Phase.PENDING, Phase.RUNNING)
    assert len((await admin.get("/ledger")).json()["entries"]) == 1


async def test_two_instances_never_hand_out_the_same_pod_ip() -> None:
    fast = {"provisioning_seconds": 0, "serving_after_seconds": 0}
    async with (
        running_fakecloud(config(lifecycle=fast)) as one,
        running_fakecloud(config(lifecycle=fast)) as two,
    ):
        ips: list[str] = []
        for server in (one, two):
            adapter = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url))
            try:
                for i in range(2):
                    await adapter.deploy(request(f"{server.port}-{i}"))
                await asyncio.sleep(0.01)
                ips += [s.ip for s in await adapter.list("vk-test") if s.ip]
            finally:
                await adapter.close()
        assert len(ips) == 4 and len(set(ips)) == 4
        assert ip_network(one.store.config, one.port) != ip_network(two.store.config, two.port)


def test_ip_range_config_and_reuse_of_freed_addresses() -> None:
    store = Store(config(ip_range="192.168.7.0/30", catalog=[{"gpu_type": "H100", "price_per_hour": 1}]))
    a, _ = store.create(request("a", gpu=None), {})
    b, _ = store.create(request("b", gpu=None), {})
    assert {a.ip, b.ip} == {"192.168.7.1", "192.168.7.2"}
    store.remove("a")
    c, _ = store.create(request("c", gpu=None), {})
    assert c.ip == "192.168.7.1"  # the only free one: never a live deployment's address
    with pytest.raises(Exception, match="exhausted"):
        store.create(request("d", gpu=None), {})
    with pytest.raises(ValueError, match="ip_range"):
        config(ip_range="not-a-cidr")
    derived = ip_network(config(), 18081)
    assert derived.prefixlen == 18 and derived.subnet_of(ipaddress.IPv4Network("10.0.0.0/8"))
    assert not derived.overlaps(ipaddress.IPv4Network("10.0.0.0/24"))  # the cluster's service IPs
    assert ip_network(config(), 18081) != ip_network(config(), 18082)


async def test_a_create_that_timed_out_on_the_client_still_happens(
    server: FakeCloudServer, admin: httpx.AsyncClient
) -> None:
    await admin.patch("/knobs", json={"timeout_rate": 1.0, "hang_seconds": 0.5, "paths": ["/v1/deployments"]})
    impatient = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, timeout_seconds=0.1))
    try:
        with pytest.raises(Transient, match="timed out"):
            await impatient.deploy(request("late"))
    finally:
        await impatient.close()
    await eventually(lambda: _has(server, "late"), timeout=5, interval=0.05)


async def _has(server: FakeCloudServer, uid: str) -> bool:
    return uid in server.store.deployments
