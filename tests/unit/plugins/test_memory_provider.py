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
