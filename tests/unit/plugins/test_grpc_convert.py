"""Model <-> protobuf conversion keeps every field, and rejects malformed replies."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vkprovider.models import (
    Capabilities,
    Container,
    ContainerState,
    ContainerStatus,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    EnvVar,
    FileMount,
    LogOptions,
    Offer,
    Phase,
    Port,
    PortMapping,
    ProviderInfo,
    RateLimit,
    RegistryCredential,
)
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc import convert, convert_request

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def full_request() -> DeploymentRequest:
    container = Container(
        name="main",
        image="ghcr.io/x/y:1",
        command=["python"],
        args=["-m", "serve"],
        env=[EnvVar(name="TOKEN", value="s3cret", secret=True), EnvVar(name="A", value="")],
        ports=[Port(container_port=8080, protocol="UDP", name="http")],
        working_dir="/app",
        cpu=2.5,
        memory_bytes=8 << 30,
        files=[FileMount(path="/etc/c", content=b"\x00\xffbin", mode=0o600, secret=True)],
    )
    return DeploymentRequest(
        uid="uid-1",
        namespace="ns",
        name="pod",
        node_name="vk",
        containers=[container],
        init_containers=[Container(name="init", image="busybox")],
        gpu_type="H100-SXM-80GB",
        gpu_count=2,
        gpu_memory_gb=80.0,
        offer_id="o1",
        region="eu",
        spot=True,
        restart_policy="Never",
        registry_credentials=[RegistryCredential(server="r", username="u", password="p")],
        labels={"app": "x"},
        annotations={"a": "b"},
    )


def test_request_round_trip_adds_the_identity_labels() -> None:
    request = full_request()
    back = convert_request.request_from_pb(
        pb.DeploymentRequest.FromString(convert_request.request_to_pb(request).SerializeToString())
    )
    assert back == request.model_copy(update={"labels": {**request.labels, **request.tags()}})


def test_optional_request_fields_stay_unset() -> None:
    minimal = DeploymentRequest(uid="u", namespace="n", name="p", node_name="vk", containers=[])
    back = convert_request.request_from_pb(convert_request.request_to_pb(minimal))
    assert (back.gpu_type, back.offer_id, back.region) == (None, None, None)


@pytest.mark.parametrize("phase", list(Phase))
def test_status_round_trip(phase: Phase) -> None:
    status = DeploymentStatus(
        uid="u",
        phase=phase,
        ready=True,
        node_name="vk",
        provider_id="p-1",
        offer_id="o",
        ip="10.0.0.1",
        endpoint="https://x",
        reason="R",
        message="M",
        started_at=T0,
        containers=[
            ContainerStatus(
                name="main",
                state=ContainerState.TERMINATED,
                ready=False,
                restart_count=3,
                reason="Error",
                message="oom",
                exit_code=0,
                started_at=T0,
                finished_at=T0,
                image="img",
            )
        ],
        price_per_hour=0.0,
    )
    wire = pb.DeploymentStatus.FromString(convert.status_to_pb(status).SerializeToString())
    assert convert.status_from_pb(wire) == status


def test_endpoints_carried_by_a_status_cross_the_wire_and_unset_stays_unset() -> None:
    endpoints = DeploymentEndpoints(
        uid="u",
        addresses=["198.18.0.7"],
        ports=[
            PortMapping(container_port=8000, port=38000),
            PortMapping(container_port=53, protocol="UDP", port=53),
        ],
    )
    carried = DeploymentStatus(uid="u", phase=Phase.RUNNING, endpoints=endpoints)
    wire = pb.DeploymentStatus.FromString(convert.status_to_pb(carried).SerializeToString())
    assert convert.status_from_pb(wire) == carried
    none = DeploymentStatus(uid="u", phase=Phase.RUNNING)
    wire = pb.DeploymentStatus.FromString(convert.status_to_pb(none).SerializeToString())
    assert not wire.HasField("endpoints") and convert.status_from_pb(wire).endpoints is None
    bad = pb.DeploymentStatus(uid="u", phase=wire.phase)
    bad.endpoints.ports.add(container_port=0, port=1)  # out of range
    with pytest.raises(convert.MalformedReply):
        convert.status_from_pb(bad)


def test_info_offer_and_log_options_round_trip() -> None:
    info = ProviderInfo(name="n", adapter="a", version="1", capabilities=Capabilities(logs=True, watch=True))
    assert convert.info_from_pb(convert.info_to_pb(info), name="n") == info
    for limit in (RateLimit(per_second=2.5, burst=4), RateLimit()):  # a declared limit; declared none
        limited = info.model_copy(update={"capabilities": Capabilities(rate_limit=limit)})
        wire = pb.ProviderInfo.FromString(convert.info_to_pb(limited).SerializeToString())
        assert convert.info_from_pb(wire, name="n") == limited
    offer = Offer(
        provider="p", offer_id="o", gpu_type="A100", gpu_count=8, gpu_memory_gb=80, region="us",
        price_per_hour=12.5, capacity=3, spot=True, cpu=64, memory_gb=512,
    )  # fmt: skip
    assert convert.offer_from_pb(convert.offer_to_pb(offer)) == offer
    options = LogOptions(
        container="c", follow=True, tail_lines=0, since_seconds=5, limit_bytes=10, timestamps=True
    )
    assert convert_request.log_options_from_pb(convert_request.log_options_to_pb(options)) == options
    assert (
        convert_request.log_options_from_pb(convert_request.log_options_to_pb(LogOptions())) == LogOptions()
    )


def test_unknown_phase_or_container_state_is_malformed() -> None:
    with pytest.raises(convert.MalformedReply, match="unknown phase 42"):
        convert.status_from_pb(pb.DeploymentStatus(uid="u", phase=42))  # type: ignore[arg-type]
    with pytest.raises(convert.MalformedReply, match="unknown phase 0"):
        convert.status_from_pb(pb.DeploymentStatus(uid="u"))
    bad_container = pb.DeploymentStatus(
        uid="u", phase=pb.PHASE_RUNNING, containers=[pb.ContainerStatus(name="c")]
    )
    with pytest.raises(convert.MalformedReply, match="container state"):
        convert.status_from_pb(bad_container)


def test_values_the_model_rejects_are_malformed() -> None:
    with pytest.raises(convert.MalformedReply, match="price_per_hour"):
        convert.offer_from_pb(pb.Offer(provider="p", offer_id="o", gpu_type="A", price_per_hour=-1))
