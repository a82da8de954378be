"""The public plugin API: the one module a provider adapter imports from vkprovider.

An adapter is a class with a nested pydantic ``Settings`` model and a constructor
``__init__(self, name: str, settings: Settings)``, registered under the ``vkprovider.providers``
entry-point group. It implements :class:`Provider`, and optionally :class:`SupportsLogs`,
:class:`SupportsWatch`, :class:`SupportsMetrics` and :class:`SupportsEndpoints` (declared through ``ProviderInfo.capabilities``).

Contract rules (the contract suite, :mod:`vkprovider.contract`, checks every one; the field-level
reference is docs/plugin-api.md):

* ``deploy`` MUST be idempotent on ``request.uid``: deploying the same UID twice yields one
  deployment, and the second call returns its current status — also when several calls for a
  new UID arrive at once (hold :class:`UidLocks` around "look up, create if missing", or use the
  cloud's idempotency key / "already exists" answer).
* ``delete`` of an unknown UID MUST succeed. It returns True only when the deployment is
  certainly gone (then the host does not ``get`` it to confirm), else None.
* ``list(node_name)`` MUST return only deployments labelled for that node
  (``DeploymentRequest.tags()`` holds the labels to attach).
* ``get`` of an unknown UID MUST raise :class:`NotFound`.
* Failures MUST be raised as one of the error classes below, never as bare exceptions:
  ``InvalidRequest`` (will never work), ``Unsupported`` (this provider cannot do it; another
  may), ``NoCapacity`` (try elsewhere), ``Transient`` (retry, optionally after ``retry_after``
  seconds), ``QuotaOrBilling`` (stop using this provider), ``NotFound``.

The adapter kit (see docs/plugin-guide.md, *The adapter kit*): :class:`CloudAdapter`
implements ``deploy``/``get``/``list``/``delete``/``endpoints``/``logs`` once — the identity map rebuilt from the cloud's labels, per-UID serialisation,
find-before-create, delete that tolerates ``NotFound`` — so an adapter writes only its cloud's
mapping (:mod:`.cloud_adapter`); :meth:`KeyedHttpClient.from_settings` builds its client and
``error_detail``/``error_class`` are its only error mapping; :func:`cheapest_offer` picks an
offer when the placement named none (:mod:`.offer_choice`); :func:`one_container_status` builds
the status of a one-container deployment (:mod:`.container_status`).

Helpers for adapter authors are re-exported here too (see docs/plugin-guide.md): API-key settings
and auth (:mod:`.apikey`), status and response → error class (:mod:`.http_errors`), catalog GPU
names (:mod:`.catalog`), per-UID deploy locks (:mod:`.uid_locks`), a keyed HTTP client with a
separate pool for log streams (:mod:`.http_client`), plain calls straight to an httpx
transport with the key's rotation rules but without ``AsyncClient``'s per-request CPU
(:mod:`.direct_http`), ``limit_bytes`` to stop a log stream at ``LogOptions.limit_bytes``
(:mod:`.log_limit`) and the project's token bucket for client-side rate limits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from vkprovider.errors import (
    InvalidRequest,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
    Unsupported,
)
from vkprovider.gpus import gpu_memory_gb, normalize_gpu
from vkprovider.models import (
    LABEL_NODE_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    Capabilities,
    Container,
    ContainerState,
    ContainerStatus,
    ContainerUsage,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    DeploymentUsage,
    EnvVar,
    FileMount,
    LogOptions,
    Offer,
    Phase,
    Port,
    PortMapping,
    ProviderInfo,
    RateLimit,
    RegistryCredential,
)
from vkprovider.plugins.apikey import ApiKeySettings, ApiKeySource, BearerAuth
from vkprovider.plugins.catalog import normalize_catalog_gpu
from vkprovider.plugins.cloud_adapter import CloudAdapter
from vkprovider.plugins.container_status import container_state, one_container_status
from vkprovider.plugins.direct_http import DirectSender
from vkprovider.plugins.h1_transport import H1Transport
from vkprovider.plugins.http_client import (
    DEFAULT_LOG_STREAM_CONNECTIONS,
    HttpCloudSettings,
    KeyedHttpClient,
    log_stream_client,
)
from vkprovider.plugins.http_errors import (
    error_body,
    error_for_status,
    json_body,
    parse_model,
    require_field,
    response_error,
    retry_after_seconds,
    transport_error,
)
from vkprovider.plugins.log_limit import limit_bytes
from vkprovider.plugins.offer_choice import cheapest_offer, same_gpu
from vkprovider.plugins.uid_locks import UidLocks
from vkprovider.ratelimit import TokenBucket

__all__ = [
    "DEFAULT_LOG_STREAM_CONNECTIONS",
    "LABEL_NODE_NAME",
    "LABEL_POD_NAME",
    "LABEL_POD_NAMESPACE",
    "LABEL_POD_UID",
    "AdapterClass",
    "ApiKeySettings",
    "ApiKeySource",
    "BearerAuth",
    "Capabilities",
    "CloudAdapter",
    "Container",
    "ContainerState",
    "ContainerStatus",
    "ContainerUsage",
    "DeploymentEndpoints",
    "DeploymentRequest",
    "DeploymentStatus",
    "DeploymentUsage",
    "DirectSender",
    "EnvVar",
    "FileMount",
    "H1Transport",
    "HttpCloudSettings",
    "InvalidRequest",
    "KeyedHttpClient",
    "LogOptions",
    "NoCapacity",
    "NotFound",
    "Offer",
    "Phase",
    "Port",
    "PortMapping",
    "Provider",
    "ProviderError",
    "ProviderInfo",
    "QuotaOrBilling",
    "RateLimit",
    "RegistryCredential",
    "SupportsEndpoints",
    "SupportsLogs",
    "SupportsMetrics",
    "SupportsWatch",
    "TokenBucket",
    "Transient",
    "UidLocks",
    "Unsupported",
    "cheapest_offer",
    "container_state",
    "error_body",
    "error_for_status",
    "gpu_memory_gb",
    "json_body",
    "limit_bytes",
    "log_stream_client",
    "normalize_catalog_gpu",
    "normalize_gpu",
    "one_container_status",
    "parse_model",
    "require_field",
    "response_error",
    "retry_after_seconds",
    "same_gpu",
    "transport_error",
]


@runtime_checkable
class Provider(Protocol):
    """The narrow interface every adapter implements."""

    @property
    def name(self) -> str:
        """The configured instance name (e.g. ``fakecloud-cheap``), unique within the service."""
        ...

    async def info(self) -> ProviderInfo:
        """Identity and capabilities. MUST NOT do network I/O beyond what ``probe`` does."""
        ...

    async def probe(self) -> None:
        """Return if the backend is reachable and usable; raise ``Transient`` (or another error) if not."""
        ...

    async def offers(self) -> list[Offer]:
        """The current catalog. The caller caches it; a failure keeps the last good catalog."""
        ...

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        """Create the deployment for ``request.uid`` unless it exists (idempotent on the UID).

        If it exists and ``update_in_place`` is not a capability, the existing status is returned.
        """
        ...

    async def get(self, uid: str) -> DeploymentStatus:
        """Status of the deployment for ``uid``; raise ``NotFound`` if there is none."""
        ...

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        """Every deployment labelled for ``node_name``, and no other. One call serves all pods."""
        ...

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> bool | None:
        """Delete the deployment for ``uid``. Deleting an unknown UID MUST succeed.

        ``grace_period_seconds`` is the pod's grace period (``deletionGracePeriodSeconds``):
        a provider that can stop gracefully gives the workload that long to drain before it is
        killed; None means the provider's default. The call MAY return before the deployment
        has stopped; ``get`` then reports it until it is terminal or gone.

        Return True only when the answer says the deployment is gone (removed, no longer billed;
        the cloud said "deleted", not "accepted"): the host then asks no ``get`` to confirm it
        stopped. None (or False): it may still be stopping, the host confirms with ``get``.
        """
        ...

    async def close(self) -> None:
        """Release connections. Called once at shutdown."""
        ...


@runtime_checkable
class SupportsLogs(Protocol):
    """Optional: stream a deployment's logs (``capabilities.logs``)."""

    def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        """Yield log bytes; with ``options.follow`` keep yielding until the deployment ends."""
        ...


@runtime_checkable
class SupportsWatch(Protocol):
    """Optional: push status changes instead of being polled (``capabilities.watch``)."""

    def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        """Yield every status transition of this node's deployments, up to and including terminal."""
        ...


@runtime_checkable
class SupportsMetrics(Protocol):
    """Optional: resource use of this node's deployments (``capabilities.metrics``), served on the
    kubelet API's ``/metrics/resource`` and ``/stats/summary`` for ``kubectl top`` and HPAs."""

    async def usage(self, node_name: str) -> list[DeploymentUsage]:
        """Current usage of every running deployment labelled for ``node_name`` (one call for all)."""
        ...


@runtime_checkable
class SupportsEndpoints(Protocol):
    """Optional: how a running deployment is reached (``capabilities.endpoints``), so vkprovider
    can publish it as an endpoint of the Services that select its pod (docs/virtual-node.md).

    * ``endpoints`` of an unknown UID MUST raise :class:`NotFound`.
    * ``addresses`` MUST be reachable from the cluster's nodes (a public IP, a routed address);
      never a private address of the provider's own network. Empty: no route (yet); the host
      does not publish the replica and the pod says why.
    * ``ports`` MUST hold one :class:`PortMapping` per container port a client can reach
      (container port → the port to connect to); a container port left out is unreachable.
    * The answer SHOULD stay the same for the life of the deployment: the host asks once when
      the deployment runs (and again after a redeploy), never per request or on a timer.
    """

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        """Reachable addresses and port mappings of the deployment for ``uid``."""
        ...


class AdapterClass(Protocol):
    """What an entry point in the ``vkprovider.providers`` group resolves to."""

    Settings: ClassVar[type[BaseModel]]

    def __call__(self, name: str, settings: Any) -> Provider: ...
