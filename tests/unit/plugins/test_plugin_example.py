"""docs/examples/minimal_plugin.py works as a real plugin under the supervisor."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from vkprovider.config import GrpcPluginConfig
from vkprovider.plugins.api import Container, DeploymentRequest, InvalidRequest, NotFound
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.supervisor import PluginSupervisor
from vkprovider.plugins.guard import guard

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "minimal_plugin.py"


def request(uid: str, node: str) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid, namespace="ns", name="p", node_name=node, containers=[Container(name="c", image="i")]
    )


async def test_minimal_example_plugin_keeps_the_contract() -> None:
    config = GrpcPluginConfig(command=[sys.executable, str(EXAMPLE)], shutdown_grace_seconds=5)
    provider = guard(GrpcProvider("minimal", PluginSupervisor("minimal", config), call_timeout=30))
    try:
        async with asyncio.timeout(60):
            assert (await provider.info()).adapter == "minimal"
            assert [o.gpu_type for o in await provider.offers()] == ["L4-24GB"]
            first = await provider.deploy(request("u1", "vk-a"))
            again = await provider.deploy(request("u1", "vk-a"))
            await provider.deploy(request("u2", "vk-b"))
            assert first.provider_id == again.provider_id and first.ready
            assert [s.uid for s in await provider.list("vk-a")] == ["u1"]
            with pytest.raises(NotFound, match="no deployment for pod nope"):
                await provider.get("nope")
            with pytest.raises(InvalidRequest, match="no containers"):
                await provider.deploy(request("u3", "vk-a").model_copy(update={"containers": []}))
            await provider.delete("u1")
            await provider.delete("u1")
            with pytest.raises(NotFound):
                await provider.get("u1")
    finally:
        await provider.close()
