"""Calls to the remote API server through kubernetes_asyncio, and the single error mapping.

Every call uses ``_preload_content=False`` and decodes the JSON here: that keeps response
bodies (which include Secret data on create) out of the library's debug log, and gives one
place where status codes become provider error classes. Calls pass a client-side token
bucket first (``qps``/``burst``).
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from vkprovider.plugins.api import (
    DEFAULT_LOG_STREAM_CONNECTIONS,
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    TokenBucket,
    Transient,
    error_for_status,
    retry_after_seconds,
)

log = logging.getLogger(__name__)


class Op(enum.Enum):
    CREATE = "create"
    READ = "read"
    DELETE = "delete"
    LOGS = "logs"
    NODES = "nodes"


class AlreadyExists(Exception):
    """The object exists (409 AlreadyExists on create) — the idempotent path, not an error."""


def _status_message(body: bytes) -> tuple[str, str]:
    """(reason, message) of a Kubernetes ``Status`` body, tolerating anything else."""
    try:
        status = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "", body[:200].decode(errors="replace")
    if not isinstance(status, dict):
        return "", str(status)[:200]
    return str(status.get("reason") or ""), str(status.get("message") or "")


def map_error(
    provider: str,
    op: Op,
    *,
    status: int = 0,
    body: bytes = b"",
    retry_after: str | None = None,
    exc: BaseException | None = None,
) -> ProviderError:
    """The single mapping from a failed remote-API call to a provider error class.

    Connection errors and timeouts are ``Transient``; an HTTP status is read by the shared table
    (``error_for_status``: 429/5xx ``Transient`` honouring ``Retry-After``, 401/403
    ``QuotaOrBilling`` — credentials, RBAC or a ``ResourceQuota`` fail every pod alike —, 404
    ``NotFound``, other 4xx such as a rejected pod spec ``InvalidRequest``) except where the API
    server means something else (:func:`_remote_reading`). ``NoCapacity`` is never produced here:
    the remote scheduler queues pods instead.
    """
    if exc is not None:
        return Transient(f"{op.value}: {type(exc).__name__}: {exc}"[:300], provider=provider)
    reason, detail = _status_message(body)
    message = f"{op.value}: HTTP {status} {reason}: {detail}".strip()
    return error_for_status(
        status,
        message,
        provider=provider,
        retry_after=retry_after_seconds(retry_after),
        override=_remote_reading(op, status),
    )


def _remote_reading(op: Op, status: int) -> type[ProviderError] | None:
    """The API server's own readings: 409 (conflict) and 410 (expired) are worth a retry; a 404
    on create means the namespace is missing, a configuration problem for every pod."""
    if status in (409, 410):
        return Transient
    if status == 404 and op is Op.CREATE:
        return QuotaOrBilling
    return None


_NETWORK_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class RemoteCluster:
    """A lazily connected client for one remote cluster."""

    def __init__(
        self,
        provider: str,
        *,
        kubeconfig: Path,
        context: str | None,
        qps: float,
        burst: int,
        timeout: float,
        log_max_connections: int = DEFAULT_LOG_STREAM_CONNECTIONS,
    ) -> None:
        self._provider = provider
        self._log_max_connections = log_max_connections
        self._kubeconfig = kubeconfig
        self._context = context
        self._timeout = timeout
        self._bucket = TokenBucket(qps, burst)
        self._api: k8s.ApiClient | None = None
        #: Log streams' own client and connection pool: a ``follow`` holds its connection for as
        #: long as the reader stays, and must never take one that reads, creates or deletes need.
        self._logs_api: k8s.ApiClient | None = None
        self._connect_lock = asyncio.Lock()

    async def _core(self, *, logs: bool = False) -> Any:
        async with self._connect_lock:
            if self._api is None or self._logs_api is None:
                configuration = k8s.Configuration()
                try:
                    await k8s_config.load_kube_config(
                        config_file=str(self._kubeconfig),
                        context=self._context,
                        client_configuration=configuration,
                    )
                except (ConfigException, OSError) as exc:
                    raise QuotaOrBilling(
                        f"kubeconfig {self._kubeconfig} is unusable: {type(exc).__name__}",
                        provider=self._provider,
                    ) from None
                streams = copy.deepcopy(configuration)
                streams.connection_pool_maxsize = self._log_max_connections
                self._api = k8s.ApiClient(configuration)
                self._logs_api = k8s.ApiClient(streams)
            return k8s.CoreV1Api(self._logs_api if logs else self._api)

    async def close(self) -> None:
        for api in (self._api, self._logs_api):
            if api is not None:
                await api.close()
        self._api = self._logs_api = None

    async def _send(self, op: Op, call: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run ``call(core)`` (a raw, non-preloaded API call) and return the response object;
        ``Op.LOGS`` goes over the log-stream client."""
        core = await self._core(logs=op is Op.LOGS)
        await self._bucket.acquire()
        try:
            return await call(core)
        except ApiException as exc:  # raised only when the request cannot even be built
            raise InvalidRequest(f"{op.value}: {exc.reason}", provider=self._provider) from None
        except _NETWORK_ERRORS as exc:
            raise map_error(self._provider, op, exc=exc) from None

    async def _json(self, op: Op, call: Callable[[Any], Awaitable[Any]]) -> Any:
        response = await self._send(op, call)
        try:
            body = await response.read()
        except _NETWORK_ERRORS as exc:
            raise map_error(self._provider, op, exc=exc) from None
        finally:
            response.release()
        if not 200 <= response.status < 300:
            reason, _ = _status_message(body)
            if op is Op.CREATE and response.status == 409 and reason == "AlreadyExists":
                raise AlreadyExists()
            raise map_error(
                self._provider,
                op,
                status=response.status,
                body=body,
                retry_after=response.headers.get("Retry-After"),
            )
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            log.warning("provider %s: %s answered with a body that is not JSON", self._provider, op.value)
            raise Transient(f"{op.value}: response is not JSON", provider=self._provider) from None

    def _opts(self) -> dict[str, Any]:
        return {"_preload_content": False, "_request_timeout": self._timeout}

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> Any:
        return await self._json(Op.CREATE, lambda c: c.create_namespaced_pod(namespace, body, **self._opts()))

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            await self._json(Op.CREATE, lambda c: c.create_namespaced_secret(namespace, body, **self._opts()))
        except AlreadyExists:  # left over from an attempt that failed half-way: replace it
            name = body["metadata"]["name"]
            await self._json(
                Op.CREATE, lambda c: c.replace_namespaced_secret(name, namespace, body, **self._opts())
            )

    async def ensure_namespace(self, namespace: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        try:
            await self._json(Op.CREATE, lambda c: c.create_namespace(body, **self._opts()))
        except AlreadyExists:
            return

    async def create_service(self, namespace: str, body: dict[str, Any]) -> Any:
        """Create the Service; one that exists already (an earlier attempt) is read back."""
        try:
            return await self._json(
                Op.CREATE, lambda c: c.create_namespaced_service(namespace, body, **self._opts())
            )
        except AlreadyExists:
            return await self.read_service(namespace, body["metadata"]["name"])

    async def read_service(self, namespace: str, name: str) -> Any:
        return await self._json(Op.READ, lambda c: c.read_namespaced_service(name, namespace, **self._opts()))

    async def read_pod(self, namespace: str, name: str) -> Any:
        return await self._json(Op.READ, lambda c: c.read_namespaced_pod(name, namespace, **self._opts()))

    async def list_pods(
        self, namespace: str, label_selector: str = "", limit: int | None = None
    ) -> list[Any]:
        kwargs: dict[str, Any] = {"label_selector": label_selector, **self._opts()}
        if limit is not None:
            kwargs["limit"] = limit
        body = await self._json(Op.READ, lambda c: c.list_namespaced_pod(namespace, **kwargs))
        return list(body.get("items") or [])

    async def list_active_pods_everywhere(self) -> list[Any]:
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        body = await self._json(
            Op.NODES, lambda c: c.list_pod_for_all_namespaces(field_selector=selector, **self._opts())
        )
        return list(body.get("items") or [])

    async def list_nodes(self, label_selector: str = "") -> list[Any]:
        body = await self._json(
            Op.NODES, lambda c: c.list_node(label_selector=label_selector, **self._opts())
        )
        return list(body.get("items") or [])

    async def delete(
        self, kind: str, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """Delete a pod, secret or service; one that is already gone counts as deleted."""
        method = {
            "pod": "delete_namespaced_pod",
            "secret": "delete_namespaced_secret",
            "service": "delete_namespaced_service",
        }[kind]
        extra: dict[str, Any] = (
            {} if grace_period_seconds is None else {"grace_period_seconds": grace_period_seconds}
        )
        try:
            await self._json(
                Op.DELETE,
                lambda c: getattr(c, method)(
                    name, namespace, propagation_policy="Background", **extra, **self._opts()
                ),
            )
        except NotFound:
            return

    async def stream_log(
        self, namespace: str, name: str, params: dict[str, Any]
    ) -> AsyncGenerator[bytes, None]:
        """Yield the pod log in chunks as the API server sends them."""
        response = await self._send(
            Op.LOGS,
            lambda c: c.read_namespaced_pod_log(
                name, namespace, _preload_content=False, _request_timeout=None, **params
            ),
        )
        try:
            if not 200 <= response.status < 300:
                body = await response.read()
                raise map_error(self._provider, Op.LOGS, status=response.status, body=body)
            try:
                async for chunk in response.content.iter_any():
                    yield chunk
            except _NETWORK_ERRORS as exc:
                raise map_error(self._provider, Op.LOGS, exc=exc) from None
        finally:
            response.release()
