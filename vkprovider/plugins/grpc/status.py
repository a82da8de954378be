"""The one mapping between provider error classes and gRPC status codes.

A plugin reports a failure as a gRPC status plus a typed ``ErrorDetail`` packed into a
google.rpc.Status in the standard ``grpc-status-details-bin`` trailer. The detail's ``code``
is authoritative; the status code alone is used only when a plugin sends no detail (e.g. one
written in another language that only sets a code). Everything unrecognised degrades to
``Transient``: retrying is always safe, failing a pod or disabling a provider is not.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2

from vkprovider.errors import (
    InvalidRequest,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
    Unsupported,
    provider_error_from_code,
)
from vkprovider.plugins._generated import provider_pb2 as pb

#: Trailer key (standard gRPC) carrying a serialized google.rpc.Status with details.
DETAILS_KEY = "grpc-status-details-bin"

#: Error class -> status code the server sends.
STATUS_FOR_ERROR: dict[type[ProviderError], grpc.StatusCode] = {
    Unsupported: grpc.StatusCode.UNIMPLEMENTED,
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    NoCapacity: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Transient: grpc.StatusCode.UNAVAILABLE,
    QuotaOrBilling: grpc.StatusCode.FAILED_PRECONDITION,
    NotFound: grpc.StatusCode.NOT_FOUND,
}

#: Status code -> error class, for statuses without an ``ErrorDetail``. Absent codes -> Transient.
ERROR_FOR_STATUS: dict[grpc.StatusCode, type[ProviderError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.RESOURCE_EXHAUSTED: NoCapacity,
    grpc.StatusCode.UNAVAILABLE: Transient,
    grpc.StatusCode.FAILED_PRECONDITION: QuotaOrBilling,
    grpc.StatusCode.PERMISSION_DENIED: QuotaOrBilling,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.UNIMPLEMENTED: Unsupported,  # version skew: this plugin lacks it, another may not
}

# gRPC raises RESOURCE_EXHAUSTED itself for oversized messages; that is not "no capacity".
_TOO_LARGE_MARKERS = ("larger than max", "message too large", "exceeds maximum")


def status_for(exc: ProviderError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        if cls in STATUS_FOR_ERROR:
            return STATUS_FOR_ERROR[cls]
    return grpc.StatusCode.INTERNAL


def encode_error(exc: ProviderError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """(status code, status message, trailing metadata) describing ``exc`` on the wire."""
    code = status_for(exc)
    detail = pb.ErrorDetail(code=exc.code, message=exc.message, reason=exc.reason)
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        detail.retry_after_seconds = float(retry_after)
    packed = any_pb2.Any()
    packed.Pack(detail)
    status = pb.RpcStatus(code=code.value[0], message=exc.message, details=[packed])
    return code, exc.message, ((DETAILS_KEY, status.SerializeToString()),)


def _detail_from_metadata(metadata: object) -> pb.ErrorDetail | None:
    if not metadata:
        return None
    for key, value in metadata:  # type: ignore[attr-defined]
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = pb.RpcStatus.FromString(value)
        except Exception:  # a malformed trailer is treated as absent
            return None
        for packed in status.details:
            if packed.TypeName() == pb.ErrorDetail.DESCRIPTOR.full_name:
                detail = pb.ErrorDetail()
                packed.Unpack(detail)
                return detail
    return None


def decode_error(
    code: grpc.StatusCode, message: str, trailing_metadata: object, *, provider: str
) -> ProviderError:
    """Rebuild the provider error a failed RPC carries (see the module docstring for the rules)."""
    detail = _detail_from_metadata(trailing_metadata)
    if detail is not None:
        retry_after = detail.retry_after_seconds if detail.HasField("retry_after_seconds") else None
        exc = provider_error_from_code(
            detail.code, detail.message, provider=provider, retry_after=retry_after
        )
        if detail.reason:
            exc.reason = detail.reason
        return exc
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Transient(f"plugin call deadline exceeded: {message}", provider=provider)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and any(m in message.lower() for m in _TOO_LARGE_MARKERS):
        return Transient(f"oversized message from plugin: {message}", provider=provider)
    cls = ERROR_FOR_STATUS.get(code, Transient)
    text = message or code.name
    if cls is Transient:
        return Transient(f"plugin call failed ({code.name}): {text}", provider=provider)
    return cls(text, provider=provider)


def from_rpc_error(err: grpc.RpcError, *, provider: str) -> ProviderError:
    """``decode_error`` for an exception raised by a grpc.aio call."""
    if isinstance(err, grpc.aio.AioRpcError):
        return decode_error(err.code(), err.details() or "", err.trailing_metadata(), provider=provider)
    return Transient(f"plugin call failed: {err}", provider=provider)
