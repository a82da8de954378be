"""``GrpcProvider``: the host side of an out-of-process plugin, implementing the Python API.

Every unary call runs under one deadline (``call_timeout``) covering both waiting for a channel
(e.g. while a crashed plugin restarts) and the RPC itself; the deadline is sent to the plugin so
it can give up too. Cancelling the calling task cancels the RPC. Failures always surface as
provider error classes: status codes via ``status.from_rpc_error``, malformed replies and
deadlines as ``Transient``. Watch and follow-Logs streams are open-ended (no deadline) and are
cancelled when the consumer stops iterating.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from vkprovider.errors import Transient
from vkprovider.models import (
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    DeploymentUsage,
    LogOptions,
    Offer,
    ProviderInfo,
)
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc import convert, convert_request, methods
from vkprovider.plugins.grpc.channel import AddressChannel, ChannelSource
from vkprovider.plugins.grpc.status import from_rpc_error

log = logging.getLogger(__name__)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
T = TypeVar("T")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class GrpcProvider:
    """A :class:`~vkprovider.plugins.api.Provider` (+ logs, watch, usage, endpoints) backed by a gRPC plugin.

    It always has the optional methods; the plugin's declared capabilities say which ones the
    host uses (a plugin without one answers UNIMPLEMENTED)."""

    def __init__(self, name: str, source: ChannelSource, *, call_timeout: float = 10.0) -> None:
        self._name = name
        self.source = source
        self.call_timeout = call_timeout

    @classmethod
    def dial(cls, name: str, address: str, *, call_timeout: float = 10.0) -> GrpcProvider:
        """A provider for a plugin already listening on ``address`` (no supervision)."""
        return cls(name, AddressChannel(address), call_timeout=call_timeout)

    @property
    def name(self) -> str:
        return self._name

    # ---- plumbing ------------------------------------------------------------------------

    async def _unary(self, method: methods.Method[Req, Resp], request: Req) -> Resp:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout
        try:
            async with asyncio.timeout_at(deadline):
                channel = await self.source.channel()
                call = channel.unary_unary(
                    method.path,
                    request_serializer=method.request.SerializeToString,
                    response_deserializer=method.response.FromString,
                )
                reply: Resp = await call(request, timeout=max(deadline - loop.time(), 0.001))
                return reply
        except TimeoutError:
            raise Transient(
                f"{method.name}: no reply from plugin within {self.call_timeout:g}s", provider=self._name
            ) from None
        except grpc.RpcError as err:
            raise from_rpc_error(err, provider=self._name) from None
        except asyncio.CancelledError:
            if _cancelling():
                raise
            raise self._closed_under_call(method.name) from None

    def _closed_under_call(self, method: str) -> Transient:
        # grpc.aio raises CancelledError in calls on a channel closed under them (the supervisor
        # drops a dead plugin's channel); that is a failed call, not a cancelled caller.
        return Transient(f"{method}: plugin connection closed during the call", provider=self._name)

    def _decode(self, method: str, decode: Callable[[], T]) -> T:
        try:
            return decode()
        except convert.MalformedReply as exc:
            log.error(
                "provider %s: malformed %s reply: %s", self._name, method, exc, extra={"provider": self._name}
            )
            raise Transient(f"malformed {method} reply from plugin: {exc}", provider=self._name) from None

    async def _stream(
        self, method: methods.Method[Req, Resp], request: Req, *, timeout: float | None
    ) -> AsyncIterator[Resp]:
        try:
            async with asyncio.timeout(self.call_timeout):
                channel = await self.source.channel()
        except TimeoutError:
            raise Transient(f"{method.name}: plugin not available", provider=self._name) from None
        call: Any = channel.unary_stream(
            method.path,
            request_serializer=method.request.SerializeToString,
            response_deserializer=method.response.FromString,
        )(request, timeout=timeout)
        try:
            async for reply in call:
                yield reply
        except grpc.RpcError as err:
            raise from_rpc_error(err, provider=self._name) from None
        except asyncio.CancelledError:
            if _cancelling():
                raise
            raise self._closed_under_call(method.name) from None
        finally:
            call.cancel()

    # ---- Provider --------------------------------------------------------------------------

    async def info(self) -> ProviderInfo:
        reply = await self._unary(methods.GET_INFO, pb.GetInfoRequest())
        return self._decode("GetInfo", lambda: convert.info_from_pb(reply.info, name=self._name))

    async def probe(self) -> None:
        await self._unary(methods.PROBE, pb.ProbeRequest())

    async def offers(self) -> list[Offer]:
        reply = await self._unary(methods.OFFERS, pb.OffersRequest())
        return self._decode("Offers", lambda: [convert.offer_from_pb(o) for o in reply.offers])

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        reply = await self._unary(
            methods.DEPLOY, pb.DeployRequest(request=convert_request.request_to_pb(request))
        )
        return self._decode("Deploy", lambda: convert.status_from_pb(reply.status))

    async def get(self, uid: str) -> DeploymentStatus:
        reply = await self._unary(methods.GET, pb.GetRequest(uid=uid))
        return self._decode("Get", lambda: convert.status_from_pb(reply.status))

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        reply = await self._unary(methods.LIST, pb.ListRequest(node_name=node_name))
        return self._decode("List", lambda: [convert.status_from_pb(s) for s in reply.statuses])

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> bool | None:
        reply = await self._unary(
            methods.DELETE, pb.DeleteRequest(uid=uid, grace_period_seconds=grace_period_seconds)
        )
        return True if reply.gone else None  # an older plugin never sets it: confirmed by Get

    async def close(self) -> None:
        await self.source.close()

    # ---- optional capabilities -------------------------------------------------------------

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        request = pb.LogsRequest(uid=uid, options=convert_request.log_options_to_pb(options))
        timeout = None if options.follow else self.call_timeout
        async for reply in self._stream(methods.LOGS, request, timeout=timeout):
            yield reply.data

    async def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        async for reply in self._stream(methods.WATCH, pb.WatchRequest(node_name=node_name), timeout=None):
            yield self._decode("Watch", lambda r=reply: convert.status_from_pb(r.status))  # type: ignore[misc]

    async def usage(self, node_name: str) -> builtins.list[DeploymentUsage]:
        reply = await self._unary(methods.USAGE, pb.UsageRequest(node_name=node_name))
        return self._decode("Usage", lambda: [convert.usage_from_pb(u) for u in reply.usage])

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        reply = await self._unary(methods.ENDPOINTS, pb.EndpointsRequest(uid=uid))
        return self._decode("Endpoints", lambda: convert.endpoints_from_pb(reply.endpoints))
