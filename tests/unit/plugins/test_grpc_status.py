"""The one error <-> gRPC status mapping."""

from __future__ import annotations

import grpc
import pytest

from vkprovider.errors import (
    InvalidRequest,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
    Unsupported,
)
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc.status import DETAILS_KEY, decode_error, encode_error

EXPECTED = [
    (InvalidRequest("bad image"), grpc.StatusCode.INVALID_ARGUMENT),
    (Unsupported("no volumes here"), grpc.StatusCode.UNIMPLEMENTED),
    (NoCapacity("sold out"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Transient("503", retry_after=2.5), grpc.StatusCode.UNAVAILABLE),
    (QuotaOrBilling("over quota"), grpc.StatusCode.FAILED_PRECONDITION),
    (NotFound("no such pod"), grpc.StatusCode.NOT_FOUND),
    (ProviderError("odd"), grpc.StatusCode.INTERNAL),
]


@pytest.mark.parametrize(("error", "code"), EXPECTED, ids=lambda v: getattr(v, "code", str(v)))
def test_round_trip_keeps_class_message_reason_and_retry_after(
    error: ProviderError, code: grpc.StatusCode
) -> None:
    error.reason = f"{error.code}Reason"
    status, message, trailers = encode_error(error)
    assert status == code
    back = decode_error(status, message, trailers, provider="p1")
    assert type(back) is type(error)
    assert (back.message, back.reason, back.provider) == (error.message, error.reason, "p1")
    assert getattr(back, "retry_after", None) == getattr(error, "retry_after", None)


def test_detail_wins_over_the_status_code() -> None:
    _, _, trailers = encode_error(NoCapacity("sold out"))
    back = decode_error(grpc.StatusCode.UNAVAILABLE, "x", trailers, provider="p")
    assert isinstance(back, NoCapacity)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidRequest),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, NoCapacity),
        (grpc.StatusCode.UNAVAILABLE, Transient),
        (grpc.StatusCode.FAILED_PRECONDITION, QuotaOrBilling),
        (grpc.StatusCode.PERMISSION_DENIED, QuotaOrBilling),
        (grpc.StatusCode.NOT_FOUND, NotFound),
        (grpc.StatusCode.UNIMPLEMENTED, Unsupported),  # version skew: the next provider may have it
        (grpc.StatusCode.DEADLINE_EXCEEDED, Transient),
        (grpc.StatusCode.INTERNAL, Transient),
        (grpc.StatusCode.UNKNOWN, Transient),
        (grpc.StatusCode.CANCELLED, Transient),
    ],
)
def test_status_code_alone_maps_to_a_class(code: grpc.StatusCode, cls: type[ProviderError]) -> None:
    back = decode_error(code, "plugin said so", (), provider="p")
    assert type(back) is cls
    assert "plugin said so" in back.message


def test_grpc_own_oversized_message_error_is_transient_not_no_capacity() -> None:
    text = "Received message larger than max (5242880 vs. 4194304)"
    back = decode_error(grpc.StatusCode.RESOURCE_EXHAUSTED, text, (), provider="p")
    assert type(back) is Transient and "oversized" in back.message


def test_malformed_or_foreign_details_fall_back_to_the_code() -> None:
    garbage = ((DETAILS_KEY, b"\xff\x00not a status"),)
    assert type(decode_error(grpc.StatusCode.NOT_FOUND, "gone", garbage, provider="p")) is NotFound
    foreign = pb.RpcStatus(code=5, message="m")
    foreign.details.add().Pack(pb.Offer(offer_id="not an error detail"))
    trailers = ((DETAILS_KEY, foreign.SerializeToString()),)
    assert type(decode_error(grpc.StatusCode.NOT_FOUND, "gone", trailers, provider="p")) is NotFound


def test_unknown_detail_code_degrades_to_transient() -> None:
    status = pb.RpcStatus(code=13, message="m")
    status.details.add().Pack(pb.ErrorDetail(code="SomethingNew", message="future error"))
    back = decode_error(
        grpc.StatusCode.INTERNAL, "m", ((DETAILS_KEY, status.SerializeToString()),), provider="p"
    )
    assert type(back) is Transient and back.message == "future error"
