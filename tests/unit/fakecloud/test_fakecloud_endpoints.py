"""How a fakecloud deployment is reached: its address from ``ip_range`` and its container ports."""

from __future__ import annotations

import ipaddress

import httpx
import pytest
from fakecloud_helpers import NODE, eventually, request
from vkprovider_fakecloud.adapter import FakeCloudProvider

from vkprovider.plugins.api import DeploymentEndpoints, NotFound, Phase, SupportsEndpoints


async def test_a_running_deployment_is_reached_at_its_address_on_its_container_ports(
    provider: FakeCloudProvider,
) -> None:
    assert isinstance(provider, SupportsEndpoints) and (await provider.info()).capabilities.endpoints
    status = await provider.deploy(request("uid-1"))
    assert status.phase is Phase.PENDING
    assert (await provider.endpoints("uid-1")).addresses == []  # not running yet: no route

    async def routed() -> DeploymentEndpoints | None:
        found = await provider.endpoints("uid-1")
        return found if found.addresses else None

    found = await eventually(routed)
    running = await provider.get("uid-1")
    assert found.addresses == [running.ip]
    assert ipaddress.ip_address(found.addresses[0]).version == 4
    assert [(m.container_port, m.protocol, m.port) for m in found.ports] == [(8000, "TCP", 8000)]

    await provider.delete("uid-1")
    with pytest.raises(NotFound):
        await provider.endpoints("uid-1")


async def test_a_cloud_without_a_route_answers_no_addresses(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await admin.patch("/knobs", json={"routable": False})
    await provider.deploy(request("uid-2"))
    await eventually(lambda: _running(provider, "uid-2"))
    found = await provider.endpoints("uid-2")
    assert found.uid == "uid-2" and found.addresses == [] and found.ports == []


async def _running(provider: FakeCloudProvider, uid: str) -> bool | None:
    return (await provider.get(uid)).phase is Phase.RUNNING or None


async def test_a_running_status_carries_what_endpoints_answers_and_a_pending_one_nothing(
    provider: FakeCloudProvider,
) -> None:
    pending = await provider.deploy(request("uid-3"))
    assert pending.phase is Phase.PENDING and pending.endpoints is None
    await eventually(lambda: _running(provider, "uid-3"))
    carried = [(await provider.get("uid-3")).endpoints]
    carried += [s.endpoints for s in await provider.list(NODE) if s.uid == "uid-3"]
    answered = await provider.endpoints("uid-3")
    assert answered.addresses and carried == [answered, answered]
