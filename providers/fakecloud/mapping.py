"""HTTP outcome → provider error class, written once for every fakecloud call.

400/422 InvalidRequest · 409 (or a NoCapacity body) NoCapacity · 402 and 401/403 QuotaOrBilling ·
404 NotFound · 429 Transient(retry_after) · 5xx, timeouts, connection errors and anything
unrecognised Transient. Messages carry the provider name and the server's message, never the
request body (which may hold secrets).
"""

from __future__ import annotations

import httpx

from vkprovider.plugins.api import (
    InvalidRequest,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
    retry_after_seconds,
)


def _server_error(response: httpx.Response) -> tuple[str, str]:
    try:
        body = response.json()
    except ValueError:
        return "", response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("code", "")), str(error.get("message", ""))[:500]
    return "", str(body)[:200]


def error_for_response(provider: str, response: httpx.Response) -> ProviderError:
    code, message = _server_error(response)
    status = response.status_code
    text = f"HTTP {status} {code}: {message}".replace(" : ", ": ")
    if status == 409 or code == "NoCapacity":
        return NoCapacity(text, provider=provider)
    if status in (400, 422):
        return InvalidRequest(text, provider=provider)
    if status in (401, 402, 403):
        return QuotaOrBilling(text, provider=provider)
    if status == 404:
        return NotFound(text, provider=provider)
    if status == 429:
        return Transient(
            text, provider=provider, retry_after=retry_after_seconds(response.headers.get("retry-after"))
        )
    return Transient(text, provider=provider)


def error_for_exception(provider: str, exc: Exception) -> ProviderError:
    """Transport failures (timeouts, refused connections, broken streams) are all Transient."""
    if isinstance(exc, ProviderError):
        return exc
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "unreachable"
    return Transient(f"{kind}: {type(exc).__name__}: {exc}"[:300], provider=provider)
