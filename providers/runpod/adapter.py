"""RunPod adapter: runs each pod as one RunPod GPU pod through the REST API v2.

Idempotency and scoping rest on the identity scheme in :mod:`.mapping` (pod name ``vk-<uid>`` +
``VKPROVIDER_*`` env). RunPod has no server-side filter, so ``list`` is one ``GET /v2/pods``
filtered here; ``get`` uses a uid → pod-id cache to read one pod and falls back to the list.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import httpx

from vkprovider.plugins.api import (
    ApiKeySource,
    Capabilities,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    LogOptions,
    NoCapacity,
    NotFound,
    Offer,
    ProviderInfo,
    UidLocks,
    limit_bytes,
    normalize_gpu,
)

from . import __version__
from .client import RunPodClient
from .mapping import (
    PodView,
    Target,
    build_create_body,
    check_supported,
    endpoints_from_pod,
    identity,
    offers_from_catalog,
    parse_pod,
    status_from_pod,
)
from .settings import RunPodSettings

log = logging.getLogger(__name__)


class RunPodProvider:
    """``Provider`` + ``SupportsLogs`` + ``SupportsEndpoints`` for RunPod."""

    Settings: ClassVar[type[RunPodSettings]] = RunPodSettings

    def __init__(
        self, name: str, settings: RunPodSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._name = name
        self._settings = settings
        self._key = ApiKeySource.from_settings(name, settings)
        self._client = RunPodClient(
            name,
            base_url=settings.base_url,
            key=self._key,
            timeout=settings.timeout_seconds,
            max_connections=settings.max_connections,
            log_max_connections=settings.log_max_connections,
            transport=transport,
        )
        self._ids: dict[str, str] = {}  # pod uid → RunPod pod id
        self._deploy_locks = UidLocks()

    def __repr__(self) -> str:
        return f"RunPodProvider(name={self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name,
            adapter="runpod",
            version=__version__,
            capabilities=Capabilities(logs=True, endpoints=True),
        )

    async def probe(self) -> None:
        await self._client.list_pods()

    async def offers(self) -> list[Offer]:
        offers: list[Offer] = []
        for cloud in self._settings.cloud_types:
            gpus = await self._client.list_gpu_types(cloud=cloud)
            offers.extend(offers_from_catalog(self._name, cloud, gpus, self._settings))
        return offers

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        async with self._deploy_locks.lock(request.uid):
            try:
                return await self.get(request.uid)
            except NotFound:
                pass
            check_supported(request)
            target = await self._target(request)
            body = build_create_body(request, target, self._settings)
            created = await self._client.create_pod(body)
            pod = parse_pod(self._name, created)
            self._ids[request.uid] = pod.id
            log.info("provider %s: created pod %s for uid %s", self._name, pod.id, request.uid)
            return status_from_pod(self._name, pod)

    async def _target(self, request: DeploymentRequest) -> Target:
        """The placement's offer if it chose one of ours, else the cheapest matching offer."""
        if request.gpu_count < 1:
            raise InvalidRequest("resources.limits[nvidia.com/gpu]: the RunPod adapter deploys GPU pods only")
        if request.offer_id:
            return Target.parse(request.offer_id)
        candidates = [
            offer
            for offer in await self.offers()
            if offer.capacity > 0
            and offer.gpu_count == request.gpu_count
            and (request.gpu_type is None or _same_gpu(offer.gpu_type, request.gpu_type))
            and (not request.region or offer.region == request.region)
        ]
        if not candidates:
            raise NoCapacity(
                f"no RunPod offer for {request.gpu_count} x {request.gpu_type or 'any GPU'}",
                provider=self._name,
            )
        best = min(candidates, key=lambda o: (o.price_per_hour, o.offer_id))
        return Target.parse(best.offer_id)

    async def get(self, uid: str) -> DeploymentStatus:
        return status_from_pod(self._name, await self._find(uid))

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        """The pod's public IP and port mappings (``runtime.ports``), read from the Pod object."""
        return endpoints_from_pod(uid, await self._find(uid))

    async def _find(self, uid: str) -> PodView:
        """The pod for ``uid``: by its cached id, else by listing; ``NotFound`` if none."""
        pod_id = self._ids.get(uid)
        if pod_id is not None:
            try:
                raw = await self._client.get_pod(pod_id)
            except NotFound:
                self._ids.pop(uid, None)
            else:
                found = identity(raw)
                if found is not None and found[0] == uid:
                    return parse_pod(self._name, raw)
                self._ids.pop(uid, None)
        for raw in await self._client.list_pods():
            found = identity(raw)
            if found is not None and found[0] == uid:
                pod = parse_pod(self._name, raw)
                self._ids[uid] = pod.id
                return pod
        raise NotFound(f"no RunPod pod for uid {uid}", provider=self._name)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        statuses: list[DeploymentStatus] = []
        for raw in await self._client.list_pods():
            found = identity(raw)
            if found is None or found[1] != node_name:
                continue
            pod = parse_pod(self._name, raw)
            self._ids[found[0]] = pod.id
            statuses.append(status_from_pod(self._name, pod))
        return statuses

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        # The API terminates at once (no graceful stop to ask for): the grace period is unused.
        try:
            status = await self.get(uid)
        except NotFound:
            return
        await self._client.delete_pod(status.provider_id)
        self._ids.pop(uid, None)
        self._deploy_locks.discard(uid)
        log.info("provider %s: terminated pod %s for uid %s", self._name, status.provider_id, uid)

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        """Container logs from the SSE stream; without ``follow``, stop once the backfill goes idle."""
        status = await self.get(uid)
        params: dict[str, str | int] = {"source": "container"}
        if options.since_seconds is not None:
            since = datetime.now(UTC) - timedelta(seconds=options.since_seconds)
            params["since"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        elif options.tail_lines is not None:
            params["tail"] = min(options.tail_lines, 5000)
        lines = self._client.stream_logs(status.provider_id, params)
        async with aclosing(limit_bytes(self._chunks(lines, options), options.limit_bytes)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _chunks(self, lines: AsyncIterator[str], options: LogOptions) -> AsyncIterator[bytes]:
        """SSE lines → log lines; without ``follow``, end once the backfill has gone idle."""
        async with aclosing(lines):  # type: ignore[type-var]
            while True:
                try:
                    if options.follow:
                        line = await anext(lines)
                    else:
                        line = await asyncio.wait_for(anext(lines), self._settings.log_idle_seconds)
                except (StopAsyncIteration, TimeoutError):
                    return
                chunk = _sse_line(line, options.timestamps)
                if chunk is not None:
                    yield chunk

    async def close(self) -> None:
        await self._client.close()


def _sse_line(line: str, timestamps: bool) -> bytes | None:
    """One ``data:`` line of the log stream → ``[ts ]line\\n``; other SSE lines → ``None``."""
    if not line.startswith("data:"):
        return None
    try:
        event: Any = json.loads(line[5:].strip())
        text = str(event["line"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    if timestamps and event.get("ts"):
        text = f"{event['ts']} {text}"
    return (text + "\n").encode()


def _same_gpu(offered: str, wanted: str) -> bool:
    return offered.upper() == wanted.upper() or offered.upper() == normalize_gpu(wanted).upper()
