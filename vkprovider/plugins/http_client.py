"""A pooled HTTP client for adapters of clouds with an API key.

Every failure of a call (transport error or non-success status) goes through the subclass's
``map_error`` exactly once and is scrubbed of the API key, so an adapter's callers only ever see
provider error classes and never the key. ``transport`` is injectable, as in httpx, for tests.

Log streams get a pool of their own (:func:`log_stream_client`, :meth:`KeyedHttpClient.stream`).
A ``kubectl logs -f`` holds its connection for as long as the tenant likes; on the shared pool,
a handful of follow streams (anyone with ``pods/log`` can open them) took every connection and
status reads, deploys and deletes of the whole provider queued behind them until they timed out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

import httpx

from vkprovider.errors import ProviderError
from vkprovider.plugins.apikey import ApiKeySource, BearerAuth

OpT = TypeVar("OpT")

__all__ = ["DEFAULT_LOG_STREAM_CONNECTIONS", "KeyedHttpClient", "log_stream_client"]

#: The kubelet API's default cap on concurrent follow streams per provider
#: (``kubelet.logs.max_follow_per_provider``, 50) plus room for snapshots, so every admitted
#: follow gets a connection and snapshots are still served while the follow cap is reached.
DEFAULT_LOG_STREAM_CONNECTIONS = 64


def log_stream_client(
    *,
    base_url: str = "",
    timeout: float,
    max_connections: int = DEFAULT_LOG_STREAM_CONNECTIONS,
    auth: httpx.Auth | None = None,
    headers: dict[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for log streams only, separate from the adapter's call pool.

    ``timeout`` bounds connecting, waiting for a pooled connection and each read (a stream silent
    that long ends with ``Transient``); the stream's total lifetime is the kubelet API's to bound.
    Keep-alive connections are not kept: a stream's connection is rarely reusable and an idle one
    is memory held for nothing.
    """
    return httpx.AsyncClient(
        base_url=base_url,
        auth=auth,
        timeout=httpx.Timeout(timeout),
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=0),
        headers=headers,
        transport=transport,
    )


class KeyedHttpClient(Generic[OpT]):
    """Two pools over one key: ``_http`` for calls (status, deploy, delete, catalog) and
    ``_streams`` for log streams and snapshots, so neither can starve the other."""

    def __init__(
        self,
        provider: str,
        *,
        base_url: str,
        key: ApiKeySource,
        timeout: float,
        max_connections: int,
        log_max_connections: int = DEFAULT_LOG_STREAM_CONNECTIONS,
        transport: httpx.AsyncBaseTransport | None = None,
        log_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._provider = provider
        self._key = key
        self._http = httpx.AsyncClient(
            base_url=base_url,
            auth=BearerAuth(key),
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections),
            headers={"Accept": "application/json"},
            transport=transport,
        )
        self._streams = log_stream_client(
            base_url=base_url,
            timeout=timeout,
            max_connections=log_max_connections,
            auth=BearerAuth(key),
            transport=log_transport or transport,
        )

    def map_error(
        self, op: OpT, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        """The adapter's single reading of a failed call (``op`` says what was attempted)."""
        raise NotImplementedError

    def failure(
        self, op: OpT, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        """``map_error``, with the API key scrubbed from the message."""
        return self._key.scrubbed(self.map_error(op, response=response, exc=exc))

    async def send(self, op: OpT, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; returns a successful response or raises the mapped error."""
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self.failure(op, exc=exc) from None
        if response.is_success:
            return response
        raise self.failure(op, response=response)

    @asynccontextmanager
    async def stream(
        self,
        op: OpT,
        method: str,
        url: str,
        *,
        ok: frozenset[int] = frozenset(),
        keyless: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[httpx.Response]:
        """An open, streamed response from the log-stream pool, closed on exit.

        A non-success status is read (bounded by the error readers) and raised as the mapped
        error, unless it is in ``ok`` (a status the caller handles, e.g. "not uploaded yet").
        Read errors while the caller iterates stay ``httpx`` errors: wrap them with ``failure``.
        ``keyless`` sends no API key (a pre-signed URL on another host must never receive it).
        """
        request = self._streams.build_request(method, url, **kwargs)
        try:
            if keyless:
                response = await self._streams.send(request, stream=True, auth=None)
            else:
                response = await self._streams.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self.failure(op, exc=exc) from None
        try:
            if not response.is_success and response.status_code not in ok:
                try:
                    await response.aread()
                except httpx.HTTPError as exc:
                    raise self.failure(op, exc=exc) from None
                raise self.failure(op, response=response)
            yield response
        finally:
            await response.aclose()

    async def close(self) -> None:
        try:
            await self._http.aclose()
        finally:
            await self._streams.aclose()
