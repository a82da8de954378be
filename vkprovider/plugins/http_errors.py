"""From a failed or malformed HTTP exchange to a provider error class, for HTTP adapters.

The shared reading of a status code (:func:`error_for_status`):

* 429 and 5xx → ``Transient``, carrying ``retry_after`` (see :func:`retry_after_seconds`)
* 401, 402, 403 → ``QuotaOrBilling``: a bad key, an empty balance or a missing permission fails
  every call the same way, so the provider must leave rotation and an operator be alerted
* 404 → ``NotFound``
* any other 4xx → ``InvalidRequest``
* anything else that is not a success (1xx, 3xx) → ``Transient``

The same status means different things on different endpoints of different clouds, so an
adapter passes ``override`` with its own decision (from the operation and the error wording) and
falls back to this table otherwise. Transport failures (:func:`transport_error`), success bodies
that are not JSON (:func:`json_body`) or lack what the adapter needs (:func:`require_field`,
:func:`parse_model`) are ``Transient`` and logged with the provider name.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import time
from datetime import UTC
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from vkprovider.errors import (
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
)

__all__ = [
    "error_body",
    "error_for_status",
    "json_body",
    "parse_model",
    "require_field",
    "response_error",
    "retry_after_seconds",
    "transport_error",
]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """A ``Retry-After`` header value as seconds from ``now`` (default: the current time).

    Accepts delta-seconds (``"12"``, ``"2.5"``) and an HTTP date (``"Wed, 21 Oct 2015 07:28:00
    GMT"``). Negative seconds and dates in the past give ``0.0``; a missing, unparseable or
    non-finite value gives ``None`` (retry on the caller's own backoff).
    """
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: RFC 9110 dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def transport_error(what: str, exc: BaseException, *, provider: str) -> Transient:
    """A connection error or timeout: ``Transient``, naming the exception type but not its text."""
    return Transient(f"{what}: {type(exc).__name__}", provider=provider)


def error_for_status(
    status: int,
    message: str,
    *,
    provider: str,
    retry_after: float | None = None,
    override: type[ProviderError] | None = None,
) -> ProviderError:
    """The error for a non-success ``status``: ``override`` if the adapter decided, else the table
    in the module docstring. ``retry_after`` is attached whenever the result is ``Transient``."""
    cls = override or _class_for_status(status)
    if cls is Transient:
        return Transient(message, provider=provider, retry_after=retry_after)
    return cls(message, provider=provider)


def response_error(
    response: httpx.Response,
    what: str,
    detail: str,
    *,
    provider: str,
    override: type[ProviderError] | None = None,
) -> ProviderError:
    """``error_for_status`` for a failed response: message ``"<what>: HTTP <status>: <detail>"``,
    ``retry_after`` read from its ``Retry-After`` header."""
    status = response.status_code
    return error_for_status(
        status,
        f"{what}: HTTP {status}: {detail}",
        provider=provider,
        retry_after=retry_after_seconds(response.headers.get("Retry-After")),
        override=override,
    )


def _class_for_status(status: int) -> type[ProviderError]:
    if status == 429 or status >= 500:
        return Transient
    if status in (401, 402, 403):
        return QuotaOrBilling
    if status == 404:
        return NotFound
    if 400 <= status < 500:
        return InvalidRequest
    return Transient


def error_body(response: httpx.Response) -> dict[str, Any] | str:
    """An error response's JSON object, or its text clipped to 200 characters (or the reason
    phrase) when the body is not a JSON object, for the adapter to pick its fields from."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:200] or response.reason_phrase
    if not isinstance(body, dict):
        return str(body)[:200]
    return body


def json_body(response: httpx.Response, what: str, *, provider: str) -> Any:
    """The decoded JSON of a success response; a body that is not JSON is ``Transient``, logged."""
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        log.warning("provider %s: %s returned a body that is not JSON", provider, what)
        raise Transient(f"{what}: response is not JSON", provider=provider) from None


def require_field(body: Any, key: str, what: str, *, provider: str) -> Any:
    """``body[key]``; a body that is not an object or lacks ``key`` is ``Transient``, logged."""
    if not isinstance(body, dict) or key not in body:
        log.warning("provider %s: %s response lacks %r", provider, what, key)
        raise Transient(f"{what}: response lacks {key!r}", provider=provider)
    return body[key]


def parse_model(model: type[M], raw: Any, what: str, *, provider: str) -> M:
    """Validate ``raw`` as ``model``; missing or invalid fields are ``Transient``, logged by path."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors())
        log.warning("provider %s: %s response missing or invalid fields: %s", provider, what, fields)
        raise Transient(f"{what} response missing or invalid fields: {fields}", provider=provider) from None
