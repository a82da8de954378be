"""Conversion between the plugin API's models and protobuf: identity, catalog and status.

Written field by field (not via JSON) so that every field is typed and a missing mapping is a
mypy or test failure, and so that a malformed reply (unknown phase, values pydantic rejects)
raises :class:`MalformedReply`, which the host turns into ``Transient``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from google.protobuf import timestamp_pb2
from pydantic import ValidationError

from vkprovider.models import (
    Capabilities,
    ContainerState,
    ContainerStatus,
    ContainerUsage,
    DeploymentEndpoints,
    DeploymentStatus,
    DeploymentUsage,
    Offer,
    Phase,
    PortMapping,
    ProviderInfo,
    RateLimit,
)
from vkprovider.plugins._generated import provider_pb2 as pb

T = TypeVar("T")

PHASE_TO_PB: dict[Phase, int] = {
    Phase.PENDING: pb.PHASE_PENDING,
    Phase.RUNNING: pb.PHASE_RUNNING,
    Phase.SUCCEEDED: pb.PHASE_SUCCEEDED,
    Phase.FAILED: pb.PHASE_FAILED,
    Phase.UNKNOWN: pb.PHASE_UNKNOWN,
}
PHASE_FROM_PB: dict[int, Phase] = {v: k for k, v in PHASE_TO_PB.items()}

STATE_TO_PB: dict[ContainerState, int] = {
    ContainerState.WAITING: pb.CONTAINER_STATE_WAITING,
    ContainerState.RUNNING: pb.CONTAINER_STATE_RUNNING,
    ContainerState.TERMINATED: pb.CONTAINER_STATE_TERMINATED,
}
STATE_FROM_PB: dict[int, ContainerState] = {v: k for k, v in STATE_TO_PB.items()}


class MalformedReply(ValueError):
    """A message that does not describe a valid model (unknown enum, rejected value)."""


def _ts(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def _dt(msg: timestamp_pb2.Timestamp) -> datetime:
    return msg.ToDatetime(tzinfo=UTC)


# ---- identity and catalog ------------------------------------------------------------------


def info_to_pb(info: ProviderInfo) -> pb.ProviderInfo:
    caps = info.capabilities
    limit = caps.rate_limit
    return pb.ProviderInfo(
        name=info.name,
        adapter=info.adapter,
        version=info.version,
        capabilities=pb.Capabilities(
            logs=caps.logs,
            metrics=caps.metrics,
            update_in_place=caps.update_in_place,
            watch=caps.watch,
            endpoints=caps.endpoints,
            rate_limit=None
            if limit is None
            else pb.RateLimit(per_second=limit.per_second, burst=limit.burst),
        ),
    )


def info_from_pb(msg: pb.ProviderInfo, *, name: str) -> ProviderInfo:
    c = msg.capabilities
    return checked(
        lambda: ProviderInfo(
            name=name,
            adapter=msg.adapter,
            version=msg.version,
            capabilities=Capabilities(
                logs=c.logs,
                metrics=c.metrics,
                update_in_place=c.update_in_place,
                watch=c.watch,
                endpoints=c.endpoints,
                rate_limit=_rate_limit_from_pb(c),
            ),
        )
    )


def _rate_limit_from_pb(c: pb.Capabilities) -> RateLimit | None:
    if not c.HasField("rate_limit"):
        return None
    r = c.rate_limit
    return RateLimit(per_second=r.per_second if r.HasField("per_second") else None, burst=r.burst or 1)


def offer_to_pb(o: Offer) -> pb.Offer:
    return pb.Offer(
        provider=o.provider,
        offer_id=o.offer_id,
        gpu_type=o.gpu_type,
        gpu_count=o.gpu_count,
        gpu_memory_gb=o.gpu_memory_gb,
        region=o.region,
        price_per_hour=o.price_per_hour,
        capacity=o.capacity,
        spot=o.spot,
        cpu=o.cpu,
        memory_gb=o.memory_gb,
    )


def offer_from_pb(m: pb.Offer) -> Offer:
    return checked(
        lambda: Offer(
            provider=m.provider,
            offer_id=m.offer_id,
            gpu_type=m.gpu_type,
            gpu_count=m.gpu_count,
            gpu_memory_gb=m.gpu_memory_gb,
            region=m.region,
            price_per_hour=m.price_per_hour,
            capacity=m.capacity,
            spot=m.spot,
            cpu=m.cpu,
            memory_gb=m.memory_gb,
        )
    )


# ---- status --------------------------------------------------------------------------------


def _container_status_to_pb(c: ContainerStatus) -> pb.ContainerStatus:
    msg = pb.ContainerStatus(
        name=c.name,
        state=STATE_TO_PB[c.state],  # type: ignore[arg-type]
        ready=c.ready,
        restart_count=c.restart_count,
        reason=c.reason,
        message=c.message,
        started_at=_ts(c.started_at),
        finished_at=_ts(c.finished_at),
        image=c.image,
    )
    if c.exit_code is not None:
        msg.exit_code = c.exit_code
    return msg


def _container_status_from_pb(c: pb.ContainerStatus) -> ContainerStatus:
    state = STATE_FROM_PB.get(c.state)
    if state is None:
        raise MalformedReply(f"container {c.name!r}: unknown container state {c.state}")
    return ContainerStatus(
        name=c.name,
        state=state,
        ready=c.ready,
        restart_count=c.restart_count,
        reason=c.reason,
        message=c.message,
        exit_code=c.exit_code if c.HasField("exit_code") else None,
        started_at=_dt(c.started_at) if c.HasField("started_at") else None,
        finished_at=_dt(c.finished_at) if c.HasField("finished_at") else None,
        image=c.image,
    )


def status_to_pb(s: DeploymentStatus) -> pb.DeploymentStatus:
    msg = pb.DeploymentStatus(
        uid=s.uid,
        phase=PHASE_TO_PB[s.phase],  # type: ignore[arg-type]
        ready=s.ready,
        node_name=s.node_name,
        provider_id=s.provider_id,
        offer_id=s.offer_id,
        reason=s.reason,
        message=s.message,
        started_at=_ts(s.started_at),
        containers=[_container_status_to_pb(c) for c in s.containers],
    )
    if s.ip is not None:
        msg.ip = s.ip
    if s.endpoint is not None:
        msg.endpoint = s.endpoint
    if s.price_per_hour is not None:
        msg.price_per_hour = s.price_per_hour
    if s.endpoints is not None:
        msg.endpoints.CopyFrom(endpoints_to_pb(s.endpoints))
    return msg


def status_from_pb(m: pb.DeploymentStatus) -> DeploymentStatus:
    phase = PHASE_FROM_PB.get(m.phase)
    if phase is None:
        raise MalformedReply(f"deployment {m.uid!r}: unknown phase {m.phase}")
    return checked(
        lambda: DeploymentStatus(
            uid=m.uid,
            phase=phase,
            ready=m.ready,
            node_name=m.node_name,
            provider_id=m.provider_id,
            offer_id=m.offer_id,
            ip=m.ip if m.HasField("ip") else None,
            endpoint=m.endpoint if m.HasField("endpoint") else None,
            reason=m.reason,
            message=m.message,
            started_at=_dt(m.started_at) if m.HasField("started_at") else None,
            containers=[_container_status_from_pb(c) for c in m.containers],
            price_per_hour=m.price_per_hour if m.HasField("price_per_hour") else None,
            endpoints=_endpoints(m.endpoints) if m.HasField("endpoints") else None,
        )
    )


# ---- usage ---------------------------------------------------------------------------------


def usage_to_pb(u: DeploymentUsage) -> pb.DeploymentUsage:
    return pb.DeploymentUsage(
        uid=u.uid,
        timestamp=_ts(u.timestamp),
        containers=[
            pb.ContainerUsage(
                name=c.name,
                cpu_seconds_total=c.cpu_seconds_total,
                cpu_cores=c.cpu_cores,
                memory_working_set_bytes=c.memory_working_set_bytes,
            )
            for c in u.containers
        ],
    )


def usage_from_pb(m: pb.DeploymentUsage) -> DeploymentUsage:
    if not m.HasField("timestamp"):
        raise MalformedReply(f"usage of {m.uid!r}: no timestamp")
    return checked(
        lambda: DeploymentUsage(
            uid=m.uid,
            timestamp=_dt(m.timestamp),
            containers=[
                ContainerUsage(
                    name=c.name,
                    cpu_seconds_total=c.cpu_seconds_total,
                    cpu_cores=c.cpu_cores if c.HasField("cpu_cores") else None,
                    memory_working_set_bytes=c.memory_working_set_bytes,
                )
                for c in m.containers
            ],
        )
    )


# ---- endpoints -----------------------------------------------------------------------------


def endpoints_to_pb(e: DeploymentEndpoints) -> pb.DeploymentEndpoints:
    return pb.DeploymentEndpoints(
        uid=e.uid,
        addresses=list(e.addresses),
        ports=[
            pb.PortMapping(container_port=m.container_port, protocol=m.protocol, port=m.port) for m in e.ports
        ],
    )


def endpoints_from_pb(m: pb.DeploymentEndpoints) -> DeploymentEndpoints:
    return checked(lambda: _endpoints(m))


def _endpoints(m: pb.DeploymentEndpoints) -> DeploymentEndpoints:
    """The model of ``m``; raises pydantic's ``ValidationError`` (callers wrap it in ``checked``)."""
    return DeploymentEndpoints(
        uid=m.uid,
        addresses=list(m.addresses),
        ports=[
            PortMapping(container_port=p.container_port, protocol=p.protocol or "TCP", port=p.port)
            for p in m.ports
        ],
    )


def checked(build: Callable[[], T]) -> T:
    """Run a model constructor; a pydantic ``ValidationError`` becomes ``MalformedReply``."""
    try:
        return build()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise MalformedReply(f"{exc.title}.{field}: {first['msg']}") from None
