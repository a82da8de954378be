"""HTTP outcome → provider error class, for every fakecloud call.

The shared table (``vkprovider.plugins.api.error_for_status``: 429/5xx Transient with
``retry_after``, 401/402/403 QuotaOrBilling, 404 NotFound, other 4xx InvalidRequest) with one
fakecloud reading: 409 or a ``NoCapacity`` body is NoCapacity. Timeouts and connection errors are
Transient. Messages carry the provider name and the server's message, never the request body
(which may hold secrets).
"""

from __future__ import annotations

import aiohttp
import httpx

from vkprovider.plugins.api import (
    NoCapacity,
    ProviderError,
    Transient,
    error_for_status,
    retry_after_seconds,
)

#: transport failures: httpx's, and what the aiohttp transport may let through unmapped (a
#: malformed answer is an aiohttp ``ClientResponseError``; a timeout it does not know, a bare
#: ``TimeoutError``). A caller's own deadline arrives as cancellation, never as these.
TRANSPORT_ERRORS = (httpx.HTTPError, aiohttp.ClientError, TimeoutError)


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
    return error_for_status(
        status,
        text,
        provider=provider,
        retry_after=retry_after_seconds(response.headers.get("retry-after")),
        override=NoCapacity if status == 409 or code == "NoCapacity" else None,
    )


def error_for_exception(provider: str, exc: Exception) -> ProviderError:
    """Transport failures (timeouts, refused connections, broken streams) are all Transient.

    Over aiohttp (the adapter's transport), httpx-aiohttp maps every aiohttp connection error
    (a refused connect, a server that hung up) to ``httpx.ConnectTimeout``: the aiohttp error it
    came from (its cause, or the error itself when the transport let it through) says which."""
    if isinstance(exc, ProviderError):
        return exc
    real = exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else exc
    timed_out = isinstance(real, httpx.TimeoutException | TimeoutError)
    kind = "timed out" if timed_out else "unreachable"
    return Transient(f"{kind}: {type(real).__name__}: {real}"[:300], provider=provider)
