"""One plugin's version skew must not fail pods: an older plugin that lacks ``Deploy`` (gRPC
itself answers ``UNIMPLEMENTED``, with no error detail) reads as ``Unsupported``, and placement
moves on to the next provider instead of failing the pod (issue 22)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2_grpc

from vkprovider.errors import Unsupported
from vkprovider.models import Container, DeploymentRequest, Offer
from vkprovider.placement import PlacementConfig, Placer, PodContext
from vkprovider.plugins.grpc import methods
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import ProviderServicer, generic_handler
from vkprovider.plugins.memory import InMemoryProvider


class WithoutDeploy(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Every method but ``Deploy``: what an older build of a plugin looks like to the host."""

    def __init__(self, inner: grpc.GenericRpcHandler[Any, Any]) -> None:
        self.inner = inner

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        if details.method == methods.DEPLOY.path:
            return None  # gRPC answers UNIMPLEMENTED by itself
        return self.inner.service(details)


def offer(provider: str, price: float) -> Offer:
    return Offer(
        provider=provider,
        offer_id=f"{provider}-1",
        gpu_type="H100-SXM-80GB",
        gpu_count=1,
        region="us-east",
        price_per_hour=price,
        capacity=5,
    )


@pytest.fixture
async def old_plugin(tmp_path: Path) -> AsyncIterator[GrpcProvider]:
    backend = InMemoryProvider("old", InMemoryProvider.Settings(offers=[offer("old", 1.0)]))
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((WithoutDeploy(generic_handler(ProviderServicer(backend))),))
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)  # type: ignore[attr-defined]
    server.add_insecure_port(f"unix:{tmp_path}/old.sock")
    await server.start()
    provider = GrpcProvider.dial("old", f"unix:{tmp_path}/old.sock", call_timeout=10)
    try:
        yield provider
    finally:
        await provider.close()
        await server.stop(0)


def request(uid: str) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="ns",
        name=f"pod-{uid}",
        node_name="vk-external",
        containers=[Container(name="main", image="img")],
        gpu_count=1,
    )


async def test_a_plugin_without_deploy_answers_unsupported(old_plugin: GrpcProvider) -> None:
    with pytest.raises(Unsupported):
        await old_plugin.deploy(request("u0"))


async def test_the_pod_is_placed_on_the_next_provider(old_plugin: GrpcProvider) -> None:
    current = InMemoryProvider("current", InMemoryProvider.Settings(offers=[offer("current", 2.0)]))
    placer = Placer({"old": old_plugin, "current": current}, PlacementConfig())
    await placer.refresh()
    placed = await placer.deploy(request("u1"), PodContext("ns"))
    assert placed.provider == "current" and "u1" in current.deployments
    assert [(a.provider, a.outcome) for a in placed.decision.attempts] == [
        ("old", "Unsupported"),
        ("current", "ok"),
    ]
