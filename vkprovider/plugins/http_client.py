"""A pooled HTTP client for adapters of clouds with an API key.

Every failure of a call (transport error or non-success status) goes through ``map_error``
exactly once and is scrubbed of the API key, so an adapter's callers only ever see provider
error classes and never the key. ``map_error`` reads a failure through the one status table
(:func:`~vkprovider.plugins.http_errors.error_for_status`); a subclass writes only its cloud's
departures from it: :meth:`KeyedHttpClient.error_detail` (where the error body keeps its wording)
and :meth:`KeyedHttpClient.error_class` (operation + status + wording → error class).
``transport`` is injectable, as in httpx, for tests.

Log streams get a pool of their own (:func:`log_stream_client`, :meth:`KeyedHttpClient.stream`).
A ``kubectl logs -f`` holds its connection for as long as the tenant likes; on the shared pool,
a handful of follow streams (anyone with ``pods/log`` can open them) took every connection and
status reads, deploys and deletes of the whole provider queued behind them until they timed out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar

import httpx
from pydantic import SecretStr

from vkprovider.errors import ProviderError, Transient
from vkprovider.plugins.apikey import ApiKeySource, BearerAuth
from vkprovider.plugins.http_errors import (
    error_body,
    json_body,
    require_field,
    response_error,
    transport_error,
)

OpT = TypeVar("OpT")

__all__ = ["DEFAULT_LOG_STREAM_CONNECTIONS", "HttpCloudSettings", "KeyedHttpClient", "log_stream_client"]

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


class HttpCloudSettings(Protocol):
    """What :meth:`KeyedHttpClient.from_settings` reads: an ``ApiKeySettings`` model with the
    API's base URL, a timeout and the two pool sizes."""

    @property
    def api_key(self) -> SecretStr | None: ...
    @property
    def api_key_env(self) -> str | None: ...
    @property
    def api_key_file(self) -> Path | None: ...
    @property
    def api_key_secret(self) -> str | None: ...
    @property
    def base_url(self) -> str: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def log_max_connections(self) -> int: ...


def _op_name(op: object) -> str:
    """An operation as it appears in messages: an enum's value, else its text."""
    return str(getattr(op, "value", op))


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

    @classmethod
    def from_settings(
        cls, provider: str, settings: HttpCloudSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> Self:
        """The client of one configured provider: key, base URL, timeout and pool sizes from its
        settings (``transport`` for tests)."""
        return cls(
            provider,
            base_url=settings.base_url,
            key=ApiKeySource(
                provider,
                api_key=settings.api_key,
                api_key_env=settings.api_key_env,
                api_key_file=settings.api_key_file,
                api_key_secret=settings.api_key_secret,
            ),
            timeout=settings.timeout_seconds,
            max_connections=settings.max_connections,
            log_max_connections=settings.log_max_connections,
            transport=transport,
        )

    def map_error(
        self, op: OpT, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        """The single reading of a failed call (``op`` says what was attempted): a transport
        failure is ``Transient``; a status goes through the shared table unless ``error_class``
        decides otherwise. The message is ``"<op>: HTTP <status>: <error_detail>"``."""
        what = _op_name(op)
        if exc is not None:
            return transport_error(what, exc, provider=self._provider)
        assert response is not None
        detail = self.error_detail(response)
        override = self.error_class(op, response.status_code, detail)
        return response_error(response, what, detail, provider=self._provider, override=override)

    def error_detail(self, response: httpx.Response) -> str:
        """The cloud's wording of a failed response (default: its JSON ``detail``/``message``/
        ``error`` or clipped text); override to read the cloud's own error body."""
        body = error_body(response)
        if isinstance(body, str):
            return body
        for key in ("detail", "message", "error", "msg"):
            if body.get(key):
                return str(body[key])
        return response.reason_phrase

    def error_class(self, op: OpT, status: int, detail: str) -> type[ProviderError] | None:
        """Where the cloud departs from the shared status table for this operation (e.g. 400
        reading "no capacity" on create → ``NoCapacity``); ``None``: the table decides."""
        return None

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

    async def send_json(
        self, op: OpT, method: str, path: str, *, key: str | None = None, **kwargs: Any
    ) -> Any:
        """``send`` and decode the JSON body (``Transient`` if it is not JSON); with ``key``,
        return that field of it (``Transient`` if the body lacks it)."""
        body = json_body(await self.send(op, method, path, **kwargs), _op_name(op), provider=self._provider)
        return body if key is None else self.field(op, body, key)

    def field(self, op: OpT, body: Any, key: str) -> Any:
        """``body[key]``; a body that is not an object or lacks ``key`` is ``Transient``, logged."""
        return require_field(body, key, _op_name(op), provider=self._provider)

    def list_field(self, op: OpT, body: Any, key: str) -> list[Any]:
        """``body[key]`` that must be a JSON list (else ``Transient``)."""
        value = self.field(op, body, key)
        if not isinstance(value, list):
            raise Transient(f"{_op_name(op)}: {key!r} is not a list", provider=self._provider)
        return value

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
