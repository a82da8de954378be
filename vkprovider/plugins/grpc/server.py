"""Serve any Python adapter as an out-of-process plugin: ``serve_adapter(provider, address)``.

The adapter is wrapped in the guard first, so whatever it does reaches the host as a valid reply
or a typed error (``status.encode_error``). The standard ``grpc.health.v1.Health`` service reports
SERVING while the server runs; on stop it switches to NOT_SERVING, then drains calls for the grace
period. Cancelled RPCs cancel the adapter's coroutine (grpc.aio cancels the handler task).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from vkprovider.errors import InvalidRequest, ProviderError
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.api import Provider, SupportsEndpoints, SupportsLogs, SupportsMetrics, SupportsWatch
from vkprovider.plugins.grpc import convert, convert_request, methods
from vkprovider.plugins.grpc.handshake import check_address
from vkprovider.plugins.grpc.status import encode_error
from vkprovider.plugins.guard import guard

Context = grpc.aio.ServicerContext[Any, Any]


async def _abort(context: Context, exc: ProviderError) -> NoReturn:
    """End the RPC with ``exc`` on the wire (``context.abort`` raises to unwind the handler)."""
    code, message, trailers = encode_error(exc)
    await context.abort(code, message, trailing_metadata=trailers)
    raise AssertionError("context.abort returned")


class ProviderServicer:
    """Implements ``vkprovider.v1.Provider`` on top of a (guarded) :class:`Provider`."""

    def __init__(self, provider: Provider) -> None:
        self.provider = guard(provider)

    async def GetInfo(self, request: pb.GetInfoRequest, context: Context) -> pb.GetInfoResponse:
        try:
            return pb.GetInfoResponse(info=convert.info_to_pb(await self.provider.info()))
        except ProviderError as exc:
            await _abort(context, exc)

    async def Probe(self, request: pb.ProbeRequest, context: Context) -> pb.ProbeResponse:
        try:
            await self.provider.probe()
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.ProbeResponse()

    async def Offers(self, request: pb.OffersRequest, context: Context) -> pb.OffersResponse:
        try:
            offers = await self.provider.offers()
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.OffersResponse(offers=[convert.offer_to_pb(o) for o in offers])

    async def Deploy(self, request: pb.DeployRequest, context: Context) -> pb.DeployResponse:
        try:
            try:
                deployment = convert_request.request_from_pb(request.request)
            except convert.MalformedReply as exc:
                raise InvalidRequest(f"malformed deployment request: {exc}") from None
            status = await self.provider.deploy(deployment)
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.DeployResponse(status=convert.status_to_pb(status))

    async def Get(self, request: pb.GetRequest, context: Context) -> pb.GetResponse:
        try:
            status = await self.provider.get(request.uid)
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.GetResponse(status=convert.status_to_pb(status))

    async def List(self, request: pb.ListRequest, context: Context) -> pb.ListResponse:
        try:
            statuses = await self.provider.list(request.node_name)
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.ListResponse(statuses=[convert.status_to_pb(s) for s in statuses])

    async def Delete(self, request: pb.DeleteRequest, context: Context) -> pb.DeleteResponse:
        try:
            grace = request.grace_period_seconds if request.HasField("grace_period_seconds") else None
            gone = await self.provider.delete(request.uid, grace_period_seconds=grace)
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.DeleteResponse(gone=gone is True)

    async def Watch(self, request: pb.WatchRequest, context: Context) -> AsyncIterator[pb.WatchResponse]:
        if not isinstance(self.provider, SupportsWatch):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this plugin has no watch capability")
            return
        try:
            async for status in self.provider.watch(request.node_name):
                yield pb.WatchResponse(status=convert.status_to_pb(status))
        except ProviderError as exc:
            await _abort(context, exc)

    async def Logs(self, request: pb.LogsRequest, context: Context) -> AsyncIterator[pb.LogsResponse]:
        if not isinstance(self.provider, SupportsLogs):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this plugin has no logs capability")
            return
        try:
            options = convert_request.log_options_from_pb(request.options)
            async for chunk in self.provider.logs(request.uid, options):
                yield pb.LogsResponse(data=chunk)
        except convert.MalformedReply as exc:
            await _abort(context, InvalidRequest(f"malformed log options: {exc}"))
        except ProviderError as exc:
            await _abort(context, exc)

    async def Usage(self, request: pb.UsageRequest, context: Context) -> pb.UsageResponse:
        if not isinstance(self.provider, SupportsMetrics):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this plugin has no metrics capability")
            raise AssertionError("context.abort returned")
        try:
            usage = await self.provider.usage(request.node_name)
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.UsageResponse(usage=[convert.usage_to_pb(u) for u in usage])

    async def Endpoints(self, request: pb.EndpointsRequest, context: Context) -> pb.EndpointsResponse:
        if not isinstance(self.provider, SupportsEndpoints):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this plugin has no endpoints capability")
            raise AssertionError("context.abort returned")
        try:
            endpoints = await self.provider.endpoints(request.uid)
        except ProviderError as exc:
            await _abort(context, exc)
        return pb.EndpointsResponse(endpoints=convert.endpoints_to_pb(endpoints))


def generic_handler(servicer: ProviderServicer) -> grpc.GenericRpcHandler[Any, Any]:
    """Bind every method of the table in ``methods`` to ``servicer``."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in methods.ALL_METHODS:
        behaviour = getattr(servicer, method.name)
        factory = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = factory(
            behaviour,
            request_deserializer=method.request.FromString,
            response_serializer=method.response.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(methods.SERVICE, handlers)


class PluginServer:
    """A running plugin server; ``address`` is the resolved target (real port for ``:0``)."""

    def __init__(self, server: grpc.aio.Server, health_servicer: Any, address: str) -> None:
        self.server = server
        self.health = health_servicer
        self.address = address

    async def stop(self, grace: float | None = 5.0) -> None:
        """Report NOT_SERVING, let in-flight calls finish for ``grace`` seconds, then cancel them."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)

    async def wait_closed(self) -> None:
        await self.server.wait_for_termination()


async def serve_adapter(provider: Provider, address: str) -> PluginServer:
    """Start serving ``provider`` on ``address`` (``unix:/path`` or ``127.0.0.1:PORT``, port 0 = any)."""
    target = address if address.endswith(":0") else check_address(address)
    server = grpc.aio.server(options=methods.SERVER_OPTIONS)
    server.add_generic_rpc_handlers((generic_handler(ProviderServicer(provider)),))
    health_servicer = health.aio.HealthServicer()  # type: ignore[attr-defined]
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port(target)
    if not target.startswith("unix:"):
        host = target.rpartition(":")[0]
        target = check_address(f"{host}:{port}")
    await server.start()
    return PluginServer(server, health_servicer, target)
