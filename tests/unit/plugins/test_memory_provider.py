"""The in-memory reference adapter keeps the contract's rules."""

from __future__ import annotations

import pytest

from vkprovider.models import Container, DeploymentRequest
from vkprovider.plugins.api import NotFound, Provider
from vkprovider.plugins.memory import InMemoryProvider


def request(uid: str, node: str = "vk-a") -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid, namespace="n", name=uid, node_name=node, containers=[Container(name="c", image="i")]
    )


async def test_contract_rules() -> None:
    provider = InMemoryProvider("mem")
    assert isinstance(provider, Provider)
    first = await provider.deploy(request("u1"))
    again = await provider.deploy(request("u1"))
    assert first == again and len(provider.deployments) == 1  # idempotent on the UID
    await provider.deploy(request("u2", node="vk-b"))
    assert [s.uid for s in await provider.list("vk-a")] == ["u1"]  # scoped to the node
    await provider.delete("never-deployed")  # unknown UIDs succeed
    await provider.delete("u1")
    with pytest.raises(NotFound):
        await provider.get("u1")


async def test_run_at_once_deployments_run_and_serve_and_declare_no_rate_limit() -> None:
    provider = InMemoryProvider("mem", InMemoryProvider.Settings(run_at_once=True))
    first = await provider.deploy(request("u1"))
    second = await provider.deploy(request("u2"))
    assert first.phase.value == "Running" and first.ready and first.started_at is not None
    assert first.ip and second.ip and first.ip != second.ip
    assert (await provider.get("u1")) == first
    limit = (await provider.info()).capabilities.rate_limit
    assert limit is not None and limit.per_second is None  # a dict has no API limit


async def test_by_default_deployments_stay_pending() -> None:
    status = await InMemoryProvider("mem").deploy(request("u1"))
    assert status.phase.value == "Pending" and not status.ready and status.ip is None
