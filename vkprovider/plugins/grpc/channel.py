"""Where ``GrpcProvider`` gets its channel: a fixed address, or a supervisor that may restart.

``ChannelSource.channel()`` returns the channel to use *now*; a supervisor may hand out a new one
after restarting a crashed plugin, so callers never cache it across calls.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import grpc
from grpc_health.v1 import health_pb2

from vkprovider.plugins.grpc.handshake import check_address
from vkprovider.plugins.grpc.methods import CHANNEL_OPTIONS

HEALTH_CHECK = "/grpc.health.v1.Health/Check"


class ChannelSource(Protocol):
    async def channel(self) -> grpc.aio.Channel:
        """The channel to the plugin; waits (cancellably) while a plugin (re)starts."""
        ...

    async def close(self) -> None: ...


def open_channel(address: str) -> grpc.aio.Channel:
    """An insecure channel to a local plugin (unix socket or loopback only)."""
    return grpc.aio.insecure_channel(check_address(address), options=CHANNEL_OPTIONS)


async def check_health(channel: grpc.aio.Channel, timeout: float) -> bool:
    """True if the plugin's standard health service reports SERVING within ``timeout`` seconds.

    ``wait_for_ready`` lets the call wait for the socket to appear (a plugin prints its handshake
    just before or after it starts listening).
    """
    call = channel.unary_unary(
        HEALTH_CHECK,
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    try:
        reply = await call(health_pb2.HealthCheckRequest(service=""), timeout=timeout, wait_for_ready=True)
    except grpc.aio.AioRpcError:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


class AddressChannel:
    """A plugin someone else runs (sidecar) at a fixed address; gRPC reconnects by itself."""

    def __init__(self, address: str) -> None:
        self.address = check_address(address)
        self._channel: grpc.aio.Channel | None = None
        self._lock = asyncio.Lock()

    async def channel(self) -> grpc.aio.Channel:
        if self._channel is None:
            async with self._lock:
                if self._channel is None:
                    self._channel = open_channel(self.address)
        return self._channel

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(None)
            self._channel = None
