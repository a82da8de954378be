"""Endpoints cross the gRPC boundary unchanged; a plugin without ``endpoints`` answers UNIMPLEMENTED."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.errors import InvalidRequest, NotFound
from vkprovider.models import Capabilities, DeploymentEndpoints, PortMapping, ProviderInfo
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc import convert
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.memory import InMemoryProvider

ROUTE = DeploymentEndpoints(
    uid="u1",
    addresses=["198.18.4.2"],
    ports=[
        PortMapping(container_port=8000, port=31000),
        PortMapping(container_port=5353, protocol="UDP", port=31001),
    ],
)


class Routed(InMemoryProvider):
    """Declares ``endpoints``; knows one UID."""

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self.name, adapter="routed", version="0", capabilities=Capabilities(endpoints=True)
        )

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        if uid != ROUTE.uid:
            raise NotFound(f"no deployment for {uid}", provider=self.name)
        return ROUTE


def test_endpoints_round_trip_keeps_every_field() -> None:
    assert convert.endpoints_from_pb(convert.endpoints_to_pb(ROUTE)) == ROUTE


def test_a_port_out_of_range_is_malformed() -> None:
    bad = convert.endpoints_to_pb(ROUTE)
    bad.ports[0].port = 70000
    with pytest.raises(convert.MalformedReply, match="port"):
        convert.endpoints_from_pb(bad)
    assert convert.endpoints_from_pb(pb.DeploymentEndpoints(uid="u")).addresses == []


async def test_a_routed_plugin_answers_like_in_process_and_not_found_travels(tmp_path: Path) -> None:
    server = await serve_adapter(Routed("routed"), f"unix:{tmp_path}/p.sock")
    client = GrpcProvider.dial("routed", server.address)
    try:
        assert (await client.info()).capabilities.endpoints
        assert await client.endpoints("u1") == ROUTE
        with pytest.raises(NotFound):
            await client.endpoints("u2")
    finally:
        await client.close()
        await server.stop(0)


async def test_a_plugin_without_endpoints_answers_unimplemented(tmp_path: Path) -> None:
    server = await serve_adapter(InMemoryProvider("plain"), f"unix:{tmp_path}/p.sock")
    client = GrpcProvider.dial("plain", server.address)
    try:
        assert not (await client.info()).capabilities.endpoints
        with pytest.raises(InvalidRequest, match="no endpoints capability"):
            await client.endpoints("u1")
    finally:
        await client.close()
        await server.stop(0)
