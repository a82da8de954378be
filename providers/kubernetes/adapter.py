"""Remote-Kubernetes adapter: each pod runs as one pod ``vk-<uid>`` on another cluster.

The remote cluster does the real work (scheduling, restarts, status); this adapter only
translates. The Provider plumbing (per-UID serialisation, find-before-create, tolerant delete,
``NotFound`` for unknown UIDs, bounded logs) is the adapter kit's (``CloudAdapter``); the cloud
id is the deterministic pod name (``known_id``: no search, and a second create gets 409), node
scoping comes from the node-name label (one label-selector list), and offers from the remote
nodes' allocatable GPUs minus what running pods request.
"""

from __future__ import annotations

import builtins
import logging
import math
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from vkprovider.plugins.api import (
    Capabilities,
    CloudAdapter,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    LogOptions,
    NoCapacity,
    NotFound,
    Offer,
    PortMapping,
    ProviderError,
    ProviderInfo,
    normalize_gpu,
)

from . import __version__
from .client import AlreadyExists, RemoteCluster
from .manifest import Manifests, node_selector_labels, owned_by, parse_offer_id, pod_name, service_for
from .settings import KubernetesSettings
from .status import identity, offers_from_nodes, status_from_pod

log = logging.getLogger(__name__)


class KubernetesProvider(CloudAdapter[dict[str, Any]]):
    """``Provider`` + ``SupportsLogs`` + ``SupportsEndpoints`` backed by a remote cluster."""

    Settings: ClassVar[type[KubernetesSettings]] = KubernetesSettings
    kind = "remote pod"
    #: the pod's name is derived from the UID and a second create answers AlreadyExists (read
    #: back): deploy creates and delete removes without a look-up first, one request each
    create_is_idempotent = True

    def __init__(self, name: str, settings: KubernetesSettings) -> None:
        super().__init__(name)
        self._settings = settings
        self._cluster = RemoteCluster(
            name,
            kubeconfig=settings.kubeconfig,
            context=settings.context,
            qps=settings.qps,
            burst=settings.burst,
            timeout=settings.request_timeout_seconds,
            log_max_connections=settings.log_max_connections,
        )
        self._namespace_ready = not settings.create_namespace

    def __repr__(self) -> str:
        return f"KubernetesProvider(name={self._name!r}, namespace={self._settings.namespace!r})"

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name,
            adapter="kubernetes",
            version=__version__,
            capabilities=Capabilities(logs=self._settings.logs, endpoints=self._settings.expose != "none"),
        )

    async def probe(self) -> None:
        await self._cluster.list_nodes(self._node_selector())

    def _node_selector(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self._settings.node_selector.items()))

    async def offers(self) -> builtins.list[Offer]:
        nodes = await self._cluster.list_nodes(self._node_selector())
        pods = await self._cluster.list_active_pods_everywhere() if self._settings.count_requested else []
        return offers_from_nodes(self._name, nodes, pods, self._settings)

    # ---- the kit's hooks: the remote cluster's mapping ----------------------------------------

    def identity(self, raw: Any) -> tuple[str, str] | None:
        return identity(raw)

    def parse(self, raw: Any) -> dict[str, Any]:
        view: dict[str, Any] = raw
        return view

    def cloud_id(self, view: dict[str, Any]) -> str:
        return str(view["metadata"]["name"])

    def status(self, view: dict[str, Any]) -> DeploymentStatus:
        return status_from_pod(self._name, view)

    def known_id(self, uid: str) -> str | None:
        return pod_name(uid)

    async def fetch(self, cloud_id: str) -> Any:
        return await self._cluster.read_pod(self._settings.namespace, cloud_id)

    async def fetch_all(self, node_name: str | None) -> builtins.list[Any]:
        selector = node_selector_labels(node_name) if node_name is not None else ""
        return await self._cluster.list_pods(self._settings.namespace, selector)

    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        manifests = Manifests(request, self._settings, await self._gpu_values(request))
        namespace = self._settings.namespace
        if not self._namespace_ready:
            await self._cluster.ensure_namespace(namespace)
            self._namespace_ready = True
        try:
            pod = await self._cluster.create_pod(namespace, manifests.pod)
        except AlreadyExists:
            return await self.get(request.uid)
        try:
            for secret in (manifests.secret, manifests.pull_secret):
                if secret is not None:
                    await self._cluster.create_secret(namespace, owned_by(secret, pod))
        except ProviderError:
            # never leave a pod waiting forever on a Secret that is not coming
            await self._cluster.delete("pod", namespace, manifests.name)
            raise
        await self._expose(pod)
        return status_from_pod(self._name, pod)

    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> None:
        namespace = self._settings.namespace
        # The remote kubelet honours the pod's grace period; ``get`` shows it until it is gone.
        grace = None if grace_period_seconds is None else max(0, math.ceil(grace_period_seconds))
        await self._cluster.delete("pod", namespace, cloud_id, grace_period_seconds=grace)
        for secret in (cloud_id, f"{cloud_id}-pull"):  # owned by the pod too; explicit in case GC lags
            await self._cluster.delete("secret", namespace, secret)
        if self._settings.expose != "none":
            await self._cluster.delete("service", namespace, cloud_id)

    async def _expose(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        """Create the pod's Service (``expose``), early so a load balancer has time to come up.
        A failure here costs nothing but time: ``endpoints`` creates it when it is missing."""
        service = service_for(pod, self._settings.expose) if self._settings.expose != "none" else None
        if service is None:
            return None
        try:
            created: dict[str, Any] = await self._cluster.create_service(self._settings.namespace, service)
        except ProviderError as exc:
            log.warning(
                "provider %s: Service for %s not created yet: %s", self._name, pod["metadata"]["name"], exc
            )
            return None
        return created

    async def endpoints_of(self, uid: str, pod: dict[str, Any]) -> DeploymentEndpoints:
        """The address of the pod's Service: a NodePort on ``node_addresses`` (default: the
        pod's hostIP), or the LoadBalancer's ingress; container port → nodePort / port."""
        namespace, name = self._settings.namespace, pod_name(uid)
        status = pod.get("status") or {}
        if self._settings.expose == "none" or status.get("phase") != "Running":
            return DeploymentEndpoints(uid=uid)
        try:
            service = await self._cluster.read_service(namespace, name)
        except NotFound:
            service = await self._expose(pod)
        if not service:
            return DeploymentEndpoints(uid=uid)
        node_port = self._settings.expose == "NodePort"
        if node_port:
            addresses = list(self._settings.node_addresses) or [a for a in [status.get("hostIP")] if a]
        else:
            ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
            addresses = [
                i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")
            ]
        ports = [
            PortMapping(
                container_port=int(p["targetPort"]),
                protocol=p.get("protocol", "TCP"),
                port=int(p["nodePort"] if node_port else p["port"]),
            )
            for p in (service.get("spec") or {}).get("ports") or []
            if isinstance(p.get("targetPort"), int) and (p.get("nodePort") or not node_port)
        ]
        return DeploymentEndpoints(uid=uid, addresses=addresses if ports else [], ports=ports)

    async def _gpu_values(self, request: DeploymentRequest) -> builtins.list[str]:
        """GPU-type label values the pod may land on: the offer's, or every node value of the type."""
        if request.offer_id:
            parsed = parse_offer_id(request.offer_id)
            if parsed is not None:
                return [parsed[0]] if parsed[0] else []
        if not request.gpu_type or request.gpu_count < 1:
            return []
        wanted = normalize_gpu(request.gpu_type)
        label = self._settings.gpu_type_label
        values = {
            str(value)
            for node in await self._cluster.list_nodes(self._node_selector())
            if (value := ((node.get("metadata") or {}).get("labels") or {}).get(label))
            and normalize_gpu(str(value)) == wanted
        }
        if not values:
            raise NoCapacity(f"no remote node has GPU type {request.gpu_type}", provider=self._name)
        return sorted(values)

    async def log_chunks(self, uid: str, pod: dict[str, Any], options: LogOptions) -> AsyncIterator[bytes]:
        """The remote pod log API, with the kubelet's options passed straight through."""
        params: dict[str, Any] = {"follow": options.follow, "timestamps": options.timestamps}
        if options.container:
            params["container"] = options.container
        if options.tail_lines is not None:
            params["tail_lines"] = options.tail_lines
        if options.since_seconds is not None:
            params["since_seconds"] = options.since_seconds
        if options.limit_bytes is not None:
            params["limit_bytes"] = options.limit_bytes
        stream = self._cluster.stream_log(self._settings.namespace, self.cloud_id(pod), params)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await stream.aclose()

    async def close(self) -> None:
        await self._cluster.close()
