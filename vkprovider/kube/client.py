"""The service's Kubernetes client: raw JSON over kubernetes_asyncio's authenticated transport.

kubernetes_asyncio handles kubeconfig/in-cluster config, TLS and token refresh; we skip its
model (de)serialisation, which dominates CPU for list/watch of many pods, and exchange plain
dicts. Every request passes one explicit QPS/burst limiter (the Go defaults of 5/10 are a known
bottleneck, so they are configurable) and failures become typed ``KubeError`` subclasses. The
proxy environment is read once at start-up (``transport``), not on every request.

Short calls (``request``: reads, writes, Events) go through ``vkprovider.h1``, a lean HTTP/1.1
pool at about half aiohttp's CPU per call; watches (``stream``) and anything behind a proxy go
through kubernetes_asyncio's aiohttp session. Both share the TLS settings, credentials, limiter,
error mapping and counters.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from vkprovider import h1, jsoncodec
from vkprovider.errors import ConfigError
from vkprovider.kube.errors import KubeError, KubeUnavailable, error_for_status
from vkprovider.kube.transport import lean_pool, settle_environment
from vkprovider.ratelimit import TokenBucket

log = logging.getLogger(__name__)

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def default_kubeconfig() -> str | None:
    """Where kubectl would look when no kubeconfig is given: inside a pod, the in-cluster
    ServiceAccount (``None``); elsewhere ``$KUBECONFIG`` (its first file), else ``~/.kube/config``
    if it exists. A workstation run of a CLI command then works as ``kubectl`` does instead of
    failing on the missing in-cluster environment."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return listed[0]
    home = Path.home() / ".kube" / "config"
    return str(home) if home.is_file() else None


class KubeClient:
    """A thin, rate-limited JSON client; one per process."""

    def __init__(self, api: client.ApiClient, *, qps: float | None = 50.0, burst: int = 100) -> None:
        settle_environment(api)
        self._api = api
        #: the short calls' pool (None behind a proxy: those go through aiohttp)
        self._lean = lean_pool(api, api.configuration.connection_pool_maxsize or 100)
        #: None: unthrottled (the heartbeat sibling, whose few calls must never queue)
        self._limiter = None if qps is None else TokenBucket(qps, burst)
        #: answers by (verb, resource, HTTP status; 0 = no answer: connection error, timeout), a
        #: plain dict increment per request that ``/metrics`` exports as a counter at scrape time
        self.responses: Counter[tuple[str, str, int]] = Counter()

    @property
    def calls(self) -> int:
        """API requests made (for figures in bench/, ``/state`` and the closing notes)."""
        return sum(self.responses.values())

    @property
    def calls_by(self) -> Counter[tuple[str, str]]:
        """API requests made by (verb, resource[/subresource]), for the same figures."""
        by: Counter[tuple[str, str]] = Counter()
        for (verb, resource, _), count in self.responses.items():
            by[verb, resource] += count
        return by

    @classmethod
    async def connect(cls, kubeconfig: str | None, *, qps: float = 50.0, burst: int = 100) -> KubeClient:
        configuration = client.Configuration()
        source = kubeconfig or default_kubeconfig()
        try:
            if source:
                await config.load_kube_config(config_file=source, client_configuration=configuration)
            else:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError, ValueError) as exc:
            where = f"kubeconfig {source}" if source else "the in-cluster ServiceAccount"
            raise ConfigError(
                f"cannot load {where}: {exc} (pass --kubeconfig / kube.kubeconfig, set KUBECONFIG, "
                "or run inside a pod)"
            ) from None
        return cls(client.ApiClient(configuration), qps=qps, burst=burst)

    def sibling(self, *, pool: int, qps: float | None = None, burst: int = 1) -> KubeClient:
        """A client with this one's apiserver, TLS and credentials but its own connection pool
        (``pool`` connections) and its own limiter (``qps`` None: none at all).

        The kubelet renews its heartbeat through such a client: the node Lease, node status and
        the leader-election Lease must not queue behind pod status writes, Events or a flood of
        TokenReviews in the shared limiter or the shared pool, or the node goes NotReady (and
        the leader loses its Lease) exactly when the process is busiest. Close it separately."""
        configuration = copy.deepcopy(self._api.configuration)
        configuration.connection_pool_maxsize = pool
        return KubeClient(client.ApiClient(configuration), qps=qps, burst=burst)

    @property
    def connections_opened(self) -> int:
        """Connections the request pool opened so far (0 where requests go through aiohttp): a
        keep-alive pool opens about as many as requests were ever in flight at once."""
        return self._lean.opened if self._lean is not None else 0

    async def close(self) -> None:
        if self._lean is not None:
            await self._lean.close()
        await self._api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        decode: bool = True,
        accept: str = "application/json",
    ) -> Any:
        """One API call; returns the decoded JSON body (or None for an empty body, or when
        ``decode`` is False: a write whose answer the caller does not need is not parsed)."""
        if self._lean is not None:
            return await self._request_lean(
                self._lean, method, path, query, body, content_type, timeout, decode, accept
            )
        resp = await self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout, accept=accept
        )
        try:
            with _transport_errors(method, path):
                raw = await resp.read()
                # Decoded inside the mapping: a 2xx whose body is not JSON (a proxy's HTML page,
                # a body cut short) is a transport failure like any other, never a raw
                # JSONDecodeError escaping to callers that retry on ``KubeError``.
                return jsoncodec.decode(raw) if raw and decode else None
        finally:
            resp.release()

    async def stream(
        self, path: str, *, query: Mapping[str, Any] | None = None, timeout: float = 330.0
    ) -> AsyncIterator[JSON]:
        """A watch: yields each JSON line (``{"type": ..., "object": ...}``) until the server closes.

        A stream cut mid-read (apiserver restart, dropped connection, read timeout, a truncated
        line) raises ``KubeUnavailable`` like any other transport failure, never a raw aiohttp
        error, so watchers can retry on one class."""
        resp = await self._send("GET", path, query={**(query or {}), "watch": "true"}, timeout=timeout)
        try:
            while True:
                with _transport_errors("WATCH", path):
                    line = await resp.content.readline()
                    event = jsoncodec.decode(line) if line.strip() else None
                if not line:
                    return
                if event is not None:
                    yield event
        finally:
            resp.release()

    async def _credentials(self) -> list[tuple[str, str]]:
        """The bearer token header, if the configuration has one (client certificates live in
        the TLS context). ``auth_settings()`` runs the refresh hook: in-cluster and exec tokens
        rotate, so it is asked on every request."""
        configuration = self._api.configuration
        if "BearerToken" not in configuration.api_key:
            return []
        token = (await configuration.auth_settings()).get("BearerToken")
        return [(token["key"], token["value"])] if token else []

    async def _request_lean(
        self,
        pool: h1.Pool,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float,
        decode: bool,
        accept: str,
    ) -> Any:
        """``request`` through the lean pool: the same limiter, headers, credentials, counters and
        error classes as ``_send``; the answer's body is bounded by the pool."""
        if self._limiter is not None:
            await self._limiter.acquire()
        resource = resource_of(path)
        headers = [*self._api.default_headers.items(), ("Accept", accept), ("Accept-Encoding", "gzip")]
        headers += await self._credentials()
        data = _json_body(body)
        if data is not None:
            headers.append(("Content-Type", content_type))
        try:
            with _transport_errors(method, path):
                answer = await pool.request(method, _target(path, query), headers, data, timeout=timeout)
        except KubeError as exc:
            self.responses[method, resource, exc.status] += 1
            raise
        self.responses[method, resource, answer.status] += 1
        if answer.status >= 400:
            raise _error_from_body(answer.status, answer.body)
        with _transport_errors(method, path):
            return jsoncodec.decode(answer.body) if answer.body and decode else None

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        accept: str = "application/json",
    ) -> aiohttp.ClientResponse:
        """One request on kubernetes_asyncio's session, TLS and credentials, but not its
        ``call_api``: that walks every body recursively to "sanitize" it and re-encodes headers
        on each call, a third of the client's CPU per request, for bodies that are plain JSON."""
        if self._limiter is not None:
            await self._limiter.acquire()
        verb = "WATCH" if query and query.get("watch") == "true" else method
        resource = resource_of(path)
        api, rest = self._api, self._api.rest_client
        headers = {**api.default_headers, "Accept": accept, "Content-Type": content_type}
        headers.update(await self._credentials())
        url = (api.configuration.host or "") + _target(path, query)
        options: dict[str, Any] = {}
        if rest.proxy:
            options["proxy"] = rest.proxy
            if rest.proxy_headers:
                options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        data = _json_body(body)
        try:
            with _transport_errors(method, path):
                resp: aiohttp.ClientResponse = await rest.pool_manager.request(
                    method, url, data=data, headers=headers, timeout=_timeout(timeout), **options
                )
        except KubeError as exc:
            self.responses[verb, resource, exc.status] += 1
            raise
        self.responses[verb, resource, resp.status] += 1
        if resp.status >= 400:
            try:
                with _transport_errors(method, path):
                    raw = await resp.read()
            finally:
                resp.release()
            raise _error_from_body(resp.status, raw)
        return resp


def _target(path: str, query: Mapping[str, Any] | None) -> str:
    """``path`` with ``query`` encoded (None values left out)."""
    if not query:
        return path
    return path + "?" + urlencode([(k, _query_value(v)) for k, v in query.items() if v is not None])


def _json_body(body: Any) -> bytes | None:
    """A request body as compact JSON (None: no body)."""
    return None if body is None else jsoncodec.encode(body)


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=seconds)


@contextlib.contextmanager
def _transport_errors(method: str, path: str) -> Iterator[None]:
    """The one place transport failures become typed errors (connect, send, or mid-read)."""
    try:
        yield
    except ApiException as exc:
        raise error_for_status(exc.status or 0, str(exc.reason), exc.body) from None
    except (
        TimeoutError, aiohttp.ClientError, h1.H1Error, OSError, jsoncodec.DecodeError, UnicodeDecodeError
    ) as exc:  # fmt: skip
        # ClientPayloadError, ServerDisconnectedError, ClientConnectionError, a read timeout, or
        # a watch line cut short when the apiserver goes away mid-response.
        raise KubeUnavailable(0, f"{method} {path}: {type(exc).__name__}: {exc}") from None


#: the resources ``resource_of`` names; any other path is counted as ``other``, so a metric label
#: never carries a string taken from a request path (names come from pod specs: attacker-chosen)
RESOURCES = frozenset(
    {
        "pods", "pods/status", "pods/log", "pods/eviction", "pods/binding", "nodes", "nodes/status",
        "events", "leases", "configmaps", "secrets", "services", "endpoints", "endpointslices", "namespaces",
        "serviceaccounts", "tokenreviews", "subjectaccessreviews", "certificatesigningrequests",
        "certificatesigningrequests/approval", "certificatesigningrequests/status", "clusterqueues",
        "clusterqueues/status", "localqueues", "workloads", "resourceflavors", "jobs", "deployments",
        "customresourcedefinitions", "apiservices",
    }
)  # fmt: skip


def resource_of(path: str) -> str:
    """``pods``, ``pods/status``, ``events``… of an API path (for counting, not routing); one of
    ``RESOURCES``, else ``other``."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    parts = parts[2:] if parts[0] == "api" else parts[3:]  # api/v1/… or apis/<group>/<version>/…
    if len(parts) > 2 and parts[0] == "namespaces":
        parts = parts[2:]
    if not parts:
        return "other"
    resource = f"{parts[0]}/{parts[2]}" if len(parts) > 2 else parts[0]
    return resource if resource in RESOURCES and len(parts) <= 3 else "other"


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_from_body(status: int, raw: bytes) -> KubeError:
    try:
        body = jsoncodec.decode(raw)
        message = str(body.get("message", "")) or raw.decode(errors="replace")
    except (ValueError, AttributeError):
        body, message = None, raw.decode(errors="replace")[:500]
    return error_for_status(status, message, body)
