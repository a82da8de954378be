"""The ``vkprovider.v1.Provider`` method table and shared channel/server options.

Client and server bind methods from this one table (instead of ``*_pb2_grpc.py``), so both sides
stay typed and a test can check the table against the proto's service descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message

from vkprovider.plugins._generated import provider_pb2 as pb

SERVICE = "vkprovider.v1.Provider"

#: Largest message either side accepts; bigger replies fail as ``Transient`` ("oversized").
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

#: Options for every host-side channel: bounded message size, fast reconnects to a restarted
#: plugin, keepalive so a half-dead TCP peer is noticed during long Watch/Logs streams.
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.enable_retries", 0),
)

#: Options for plugin servers (``serve_adapter``).
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


@dataclass(frozen=True)
class Method(Generic[Req, Resp]):
    name: str
    request: type[Req]
    response: type[Resp]
    server_streaming: bool = False

    @property
    def path(self) -> str:
        return f"/{SERVICE}/{self.name}"


GET_INFO = Method("GetInfo", pb.GetInfoRequest, pb.GetInfoResponse)
PROBE = Method("Probe", pb.ProbeRequest, pb.ProbeResponse)
OFFERS = Method("Offers", pb.OffersRequest, pb.OffersResponse)
DEPLOY = Method("Deploy", pb.DeployRequest, pb.DeployResponse)
GET = Method("Get", pb.GetRequest, pb.GetResponse)
LIST = Method("List", pb.ListRequest, pb.ListResponse)
DELETE = Method("Delete", pb.DeleteRequest, pb.DeleteResponse)
WATCH = Method("Watch", pb.WatchRequest, pb.WatchResponse, server_streaming=True)
LOGS = Method("Logs", pb.LogsRequest, pb.LogsResponse, server_streaming=True)
USAGE = Method("Usage", pb.UsageRequest, pb.UsageResponse)
ENDPOINTS = Method("Endpoints", pb.EndpointsRequest, pb.EndpointsResponse)

ALL_METHODS: tuple[Method[Message, Message], ...] = (
    GET_INFO,
    PROBE,
    OFFERS,
    DEPLOY,
    GET,
    LIST,
    DELETE,
    WATCH,
    LOGS,
    USAGE,
    ENDPOINTS,
)  # type: ignore[assignment]
