"""The fakecloud adapter: ``Provider`` + ``SupportsLogs`` + ``SupportsWatch`` over the REST API.

The Provider plumbing (per-UID serialisation of deploy/delete, NotFound for unknown UIDs,
delete that tolerates NotFound and answers True on the server's 204) is the adapter kit's
(``CloudAdapter``). The server keys deployments by pod UID and its create is idempotent, so the
cloud id is the UID (``known_id``) and ``create_is_idempotent`` holds: deploy is one POST and
delete one DELETE, no look-up before either. ``endpoints`` and ``logs`` are written here rather
than on the kit's hooks because the kit looks the deployment up first, and the server answers
both by UID in one request (a 404 there is the same NotFound).

Two pooled transports per instance unless a test injects one (then both are it): plain calls
go straight (:class:`~vkprovider.plugins.direct_http.DirectSender`: ``AsyncClient``'s
per-request work cost as much CPU as the transport) to the kit's lean
:class:`~vkprovider.plugins.h1_transport.H1Transport` (about half aiohttp's CPU per call);
streams (logs, the watch), which that transport cannot carry, go through an
``httpx.AsyncClient`` over aiohttp's pool (httpx-aiohttp's ``AiohttpTransport``).
Over aiohttp rather than httpcore because httpcore's own pool walks every
connection (a readability poll each) and every queued request twice per request, which cost
~1.2 ms of CPU per call with 16 calls in flight against ~0.4 ms over aiohttp
(bench/bench_fakecloud_adapter.py). The adapter never retries on its own: the service's retry
policy decides from the error class. Every response is validated into the public models;
anything malformed is a ``Transient`` naming the provider.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlencode

import httpx
from httpx_aiohttp import AiohttpTransport
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    ApiKeySource,
    BearerAuth,
    Capabilities,
    CloudAdapter,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    DeploymentUsage,
    DirectSender,
    H1Transport,
    LogOptions,
    Offer,
    ProviderError,
    RateLimit,
    Transient,
    limit_bytes,
    normalize_gpu,
)

from .mapping import TRANSPORT_ERRORS, error_for_exception, error_for_response
from .wire import API_PREFIX, NODE_SELECTOR_PARAM, encode_request

__version__ = "0.1.0"


class FakeCloudProvider(CloudAdapter[DeploymentStatus]):
    """The server's objects are already ``DeploymentStatus``es: validated on arrival (``fetch``,
    ``fetch_all``), so a malformed answer is ``Transient`` before the kit reads its identity."""

    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid")

        url: str = Field(description="base URL of the fakecloud server, e.g. http://127.0.0.1:8081")
        timeout_seconds: float = Field(default=5.0, gt=0)
        api_key: SecretStr | None = Field(default=None, description="inline key; none: no key sent")
        api_key_env: str | None = Field(default=None, description="environment variable holding the key")
        api_key_file: Path | None = Field(
            default=None, description="file holding the key (a mounted Secret: re-read when it changes)"
        )
        api_key_secret: str | None = Field(
            default=None, description="where the variable or file comes from, named in errors"
        )

        @model_validator(mode="after")
        def _at_most_one_key_source(self) -> Self:
            given = [self.api_key is not None, bool(self.api_key_env), self.api_key_file is not None]
            if sum(given) > 1:
                raise ValueError("set at most one of api_key, api_key_env or api_key_file")
            return self

    adapter = "fakecloud"
    version = __version__
    #: the server keys deployments by pod UID and a second create returns the first one
    create_is_idempotent = True

    def __init__(
        self, name: str, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(name)
        self._settings = settings
        # The key, when one is configured, goes through the service's shared source (re-read when
        # the variable or file changes, and once more on a 401/403: rotation without a restart).
        keyed = settings.api_key is not None or settings.api_key_env or settings.api_key_file is not None
        key = self._key_source(name, settings) if keyed else None
        self._base = settings.url.rstrip("/") + API_PREFIX
        streams = transport if transport is not None else AiohttpTransport()
        # Streams (logs, watch) through the client; plain calls straight to the lean pool.
        self._client = httpx.AsyncClient(
            base_url=self._base,
            timeout=settings.timeout_seconds,
            auth=BearerAuth(key) if key is not None else None,
            transport=streams,
        )
        self._client_transport = streams
        self._calls = transport if transport is not None else H1Transport()
        self._direct = DirectSender(
            self._calls, base_url=self._base, timeout=settings.timeout_seconds, key=key
        )

    @staticmethod
    def _key_source(name: str, settings: Settings) -> ApiKeySource:
        return ApiKeySource(
            name,
            api_key=settings.api_key,
            api_key_env=settings.api_key_env,
            api_key_file=settings.api_key_file,
            api_key_secret=settings.api_key_secret,
        )

    def __repr__(self) -> str:
        return f"FakeCloudProvider(name={self._name!r}, url={self._settings.url!r})"

    def capabilities(self) -> Capabilities:
        return Capabilities(logs=True, watch=True, metrics=True, endpoints=True, rate_limit=RateLimit())

    def _url(self, path: str, params: Mapping[str, Any] | None = None) -> httpx.URL:
        """The absolute URL, parsed once: given a relative path and ``params``, httpx parses the
        URL three times (path, merge with the base URL, query) at ~0.1 ms of CPU each."""
        query = "?" + urlencode(params) if params else ""
        return httpx.URL(self._base + path + query)

    async def _call(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None
    ) -> httpx.Response:
        try:
            query = urlencode(params) if params else None
            response = await self._direct.request(method, path, params=query, json=json)
        except TRANSPORT_ERRORS as exc:
            raise error_for_exception(self._name, exc) from None
        if response.is_success:
            return response
        raise error_for_response(self._name, response)

    def _parse(self, response: httpx.Response, model: type[Any], *, many: bool = False) -> Any:
        try:
            body = response.json()
            if many:
                if not isinstance(body, list):
                    raise ValueError("expected a list")
                return [model.model_validate(item) for item in body]
            return model.model_validate(body)
        except (ValueError, ValidationError) as exc:
            message = f"malformed response from {response.request.url.path}: {str(exc)[:200]}"
            raise Transient(message, provider=self._name) from None

    def _node_params(self, node_name: str) -> dict[str, str]:
        return {NODE_SELECTOR_PARAM: f"{LABEL_NODE_NAME}={node_name}"}

    async def probe(self) -> None:
        await self._call("GET", "/health")

    async def offers(self) -> builtins.list[Offer]:
        response = await self._call("GET", "/offers")
        raw = self._parse(response, _RawOffer, many=True)
        return [o.to_offer(self._name) for o in raw]

    # ---- the kit's hooks: the server's objects are statuses keyed by pod UID ------------------

    def identity(self, raw: Any) -> tuple[str, str] | None:
        return (raw.uid, raw.node_name) if isinstance(raw, DeploymentStatus) else None

    def parse(self, raw: Any) -> DeploymentStatus:
        status: DeploymentStatus = raw
        return status

    def cloud_id(self, view: DeploymentStatus) -> str:
        return view.uid

    def status(self, view: DeploymentStatus) -> DeploymentStatus:
        return view

    def known_id(self, uid: str) -> str | None:
        return uid

    async def fetch(self, cloud_id: str) -> Any:
        return self._parse(await self._call("GET", f"/deployments/{cloud_id}"), DeploymentStatus)

    async def fetch_all(self, node_name: str | None) -> builtins.list[Any]:
        params = self._node_params(node_name) if node_name is not None else None
        response = await self._call("GET", "/deployments", params=params)
        statuses: builtins.list[Any] = self._parse(response, DeploymentStatus, many=True)
        return statuses

    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        body = {"request": encode_request(request), "labels": request.tags()}
        status: DeploymentStatus = self._parse(
            await self._call("POST", "/deployments", json=body), DeploymentStatus
        )
        return status

    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> bool | None:
        """True when the server answers 204 (gone); None on 202 (an asynchronous delete in
        flight: the service confirms with ``get``). A 404 is NotFound, which the kit tolerates."""
        # The grace period travels as a query parameter; a server that cannot stop gracefully
        # ignores it and deletes at once, which the contract allows.
        params = {} if grace_period_seconds is None else {"grace_period_seconds": f"{grace_period_seconds:g}"}
        response = await self._call("DELETE", f"/deployments/{cloud_id}", params=params)
        return True if response.status_code == 204 else None

    # ---- capabilities answered by UID in one request (no look-up first) -----------------------

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        endpoints: DeploymentEndpoints = self._parse(
            await self._call("GET", f"/deployments/{uid}/endpoints"), DeploymentEndpoints
        )
        return endpoints

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        """The server's log stream, cut at ``limit_bytes`` (the kit's) and closed as soon as the
        reader stops; the server's 404 says NotFound for an unknown deployment or container."""
        chunks = limit_bytes(self._log_stream(uid, options), options.limit_bytes)
        async with aclosing(chunks):  # type: ignore[type-var]  # an async generator: it has aclose
            async for chunk in chunks:
                yield chunk

    def _log_stream(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        params: dict[str, str | int] = {
            "follow": str(options.follow).lower(),
            "timestamps": str(options.timestamps).lower(),
        }
        if options.container:
            params["container"] = options.container
        for key in ("tail_lines", "since_seconds", "limit_bytes"):
            value = getattr(options, key)
            if value is not None:
                params[key] = value
        timeout = httpx.Timeout(
            self._settings.timeout_seconds, read=None if options.follow else self._settings.timeout_seconds
        )
        return self._stream(f"/deployments/{uid}/logs", params, timeout)

    async def close(self) -> None:
        await self._client.aclose()
        if self._calls is not self._client_transport:  # an injected one was closed with the client
            await self._calls.aclose()

    async def usage(self, node_name: str) -> builtins.list[DeploymentUsage]:
        """CPU/memory of this node's running deployments (``GET /v1/usage``), one call for all."""
        response = await self._call("GET", "/usage", params=self._node_params(node_name))
        usage: builtins.list[DeploymentUsage] = self._parse(response, DeploymentUsage, many=True)
        return usage

    async def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        """Yields every status change; ends with ``Transient`` if the stream breaks (the caller
        re-lists and watches again, as with any Kubernetes-style watch)."""
        # the server sends a heartbeat at least every few seconds; allow generous slack
        timeout = httpx.Timeout(
            self._settings.timeout_seconds, read=max(30.0, 6 * self._settings.timeout_seconds)
        )
        buffer = b""
        async for chunk in self._stream("/watch", self._node_params(node_name), timeout):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                status = self._watch_event(line)
                if status is not None:
                    yield status
        raise Transient("watch stream ended", provider=self._name)

    def _watch_event(self, line: bytes) -> DeploymentStatus | None:
        if not line.strip():
            return None
        try:
            event = json.loads(line)
            if event.get("type") != "status":
                return None
            return DeploymentStatus.model_validate(event["status"])
        except (ValueError, KeyError, AttributeError, ValidationError) as exc:
            raise Transient(f"malformed watch event: {str(exc)[:200]}", provider=self._name) from None

    async def _stream(
        self, path: str, params: dict[str, Any], timeout: httpx.Timeout
    ) -> AsyncIterator[bytes]:
        try:
            async with self._client.stream("GET", self._url(path, params), timeout=timeout) as response:
                if not response.is_success:
                    await response.aread()
                    raise error_for_response(self._name, response)
                async for chunk in response.aiter_bytes():
                    yield chunk
        except ProviderError:
            raise
        except TRANSPORT_ERRORS as exc:
            raise error_for_exception(self._name, exc) from None


class _RawOffer(BaseModel):
    """An offer as the server lists it (its own provider name is replaced by the instance name)."""

    model_config = ConfigDict(extra="ignore")

    offer_id: str
    gpu_type: str
    gpu_count: int = Field(ge=0)
    gpu_memory_gb: float = Field(ge=0, default=0.0)
    region: str = ""
    price_per_hour: float = Field(ge=0)
    capacity: int = Field(ge=0)
    spot: bool = False
    cpu: float = 0.0
    memory_gb: float = 0.0

    def to_offer(self, provider: str) -> Offer:
        return Offer(provider=provider, **{**self.model_dump(), "gpu_type": normalize_gpu(self.gpu_type)})
