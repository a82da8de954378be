"""A plugin written without our server (any language) that replies badly: the host stays sane."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.api import DeploymentRequest, InvalidRequest, NoCapacity, Transient
from vkprovider.plugins.grpc import methods
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.guard import guard


async def get_unknown_phase(request: pb.GetRequest, context: Any) -> pb.GetResponse:
    return pb.GetResponse(status=pb.DeploymentStatus(uid=request.uid, phase=99))  # type: ignore[arg-type]


async def list_oversized(request: pb.ListRequest, context: Any) -> pb.ListResponse:
    return pb.ListResponse(
        statuses=[pb.DeploymentStatus(uid="u", phase=pb.PHASE_RUNNING, message="x" * (5 << 20))]
    )


async def deploy_bare_status(request: pb.DeployRequest, context: Any) -> pb.DeployResponse:
    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "no GPUs left")
    raise AssertionError


async def probe_hangs(request: pb.ProbeRequest, context: Any) -> pb.ProbeResponse:
    await asyncio.sleep(3600)
    raise AssertionError


@pytest.fixture
async def bad_plugin(tmp_path: Path) -> AsyncIterator[GrpcProvider]:
    server = grpc.aio.server(options=[("grpc.max_send_message_length", -1)])
    handlers = {
        "Get": grpc.unary_unary_rpc_method_handler(
            get_unknown_phase, pb.GetRequest.FromString, pb.GetResponse.SerializeToString
        ),
        "List": grpc.unary_unary_rpc_method_handler(
            list_oversized, pb.ListRequest.FromString, pb.ListResponse.SerializeToString
        ),
        "Deploy": grpc.unary_unary_rpc_method_handler(
            deploy_bare_status, pb.DeployRequest.FromString, pb.DeployResponse.SerializeToString
        ),
        "Probe": grpc.unary_unary_rpc_method_handler(
            probe_hangs, pb.ProbeRequest.FromString, pb.ProbeResponse.SerializeToString
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(methods.SERVICE, handlers),))
    address = f"unix:{tmp_path}/bad.sock"
    server.add_insecure_port(address)
    await server.start()
    client = GrpcProvider.dial("bad", address, call_timeout=1.0)
    try:
        async with asyncio.timeout(20):
            yield client
    finally:
        await client.close()
        await server.stop(0)


async def test_unknown_phase_is_transient(bad_plugin: GrpcProvider) -> None:
    with pytest.raises(Transient, match="unknown phase 99"):
        await guard(bad_plugin).get("u1")


async def test_oversized_reply_is_transient(bad_plugin: GrpcProvider) -> None:
    with pytest.raises(Transient, match="oversized"):
        await bad_plugin.list("n")


async def test_bare_status_code_maps_by_code(bad_plugin: GrpcProvider) -> None:
    request = DeploymentRequest(uid="u", namespace="n", name="p", node_name="vk", containers=[])
    with pytest.raises(NoCapacity, match="no GPUs left"):
        await bad_plugin.deploy(request)


async def test_a_hanging_plugin_hits_the_call_deadline(bad_plugin: GrpcProvider) -> None:
    with pytest.raises(Transient, match=r"deadline|within"):
        await bad_plugin.probe()


async def test_missing_methods_are_invalid_requests_not_hangs(bad_plugin: GrpcProvider) -> None:
    with pytest.raises(InvalidRequest):
        await bad_plugin.delete("u")
    with pytest.raises(InvalidRequest):
        await anext(bad_plugin.watch("n"))
