"""RunPod adapter: runs each pod as one RunPod GPU pod through the REST API v2.

The Provider plumbing is the adapter kit's (:class:`~vkprovider.plugins.api.CloudAdapter`:
identity map, per-UID locks, find-before-create, tolerant delete); this module holds RunPod's
part. Identity rests on the scheme in :mod:`.mapping` (pod name ``vk-<uid>`` + ``VKPROVIDER_*``
env). RunPod has no server-side filter, so a list is one ``GET /v2/pods`` filtered by the kit.
"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import httpx

from vkprovider.plugins.api import (
    CloudAdapter,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    LogOptions,
    NoCapacity,
    Offer,
    cheapest_offer,
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


class RunPodProvider(CloudAdapter[PodView]):
    """``Provider`` + ``SupportsLogs`` + ``SupportsEndpoints`` for RunPod, on the adapter kit."""

    Settings: ClassVar[type[RunPodSettings]] = RunPodSettings
    kind = "RunPod pod"
    adapter = "runpod"
    version = __version__

    def __init__(
        self, name: str, settings: RunPodSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(name)
        self._settings = settings
        self._client = RunPodClient.from_settings(name, settings, transport=transport)

    async def probe(self) -> None:
        await self._client.list_pods()

    async def offers(self) -> builtins.list[Offer]:
        offers: builtins.list[Offer] = []
        for cloud in self._settings.cloud_types:
            gpus = await self._client.list_gpu_types(cloud=cloud)
            offers.extend(offers_from_catalog(self._name, cloud, gpus, self._settings))
        return offers

    # ---- the kit's hooks: RunPod's mapping ---------------------------------------------------

    def identity(self, raw: Any) -> tuple[str, str] | None:
        return identity(raw)

    def parse(self, raw: Any) -> PodView:
        return parse_pod(self._name, raw)

    def cloud_id(self, view: PodView) -> str:
        return view.id

    def status(self, view: PodView) -> DeploymentStatus:
        return status_from_pod(self._name, view)

    async def fetch(self, cloud_id: str) -> Any:
        return await self._client.get_pod(cloud_id)

    async def fetch_all(self, node_name: str | None) -> builtins.list[Any]:
        return await self._client.list_pods()  # no server-side filter: the kit filters by env

    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        check_supported(request)
        target = await self._target(request)
        created = await self._client.create_pod(build_create_body(request, target, self._settings))
        return status_from_pod(self._name, parse_pod(self._name, created))

    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> None:
        # The API terminates at once (no graceful stop to ask for): the grace period is unused.
        await self._client.delete_pod(cloud_id)

    async def endpoints_of(self, uid: str, view: PodView) -> DeploymentEndpoints:
        """The pod's public IP and port mappings (``runtime.ports``), read from the Pod object."""
        return endpoints_from_pod(uid, view)

    async def _target(self, request: DeploymentRequest) -> Target:
        """The placement's offer if it chose one of ours, else the cheapest matching offer."""
        if request.gpu_count < 1:
            raise InvalidRequest("resources.limits[nvidia.com/gpu]: the RunPod adapter deploys GPU pods only")
        if request.offer_id:
            return Target.parse(request.offer_id)
        best = cheapest_offer(await self.offers(), request)
        if best is None:
            raise NoCapacity(
                f"no RunPod offer for {request.gpu_count} x {request.gpu_type or 'any GPU'}",
                provider=self._name,
            )
        return Target.parse(best.offer_id)

    def log_chunks(self, uid: str, view: PodView, options: LogOptions) -> AsyncIterator[bytes]:
        """Container logs from the SSE stream; without ``follow``, stop once the backfill goes idle."""
        params: dict[str, str | int] = {"source": "container"}
        if options.since_seconds is not None:
            since = datetime.now(UTC) - timedelta(seconds=options.since_seconds)
            params["since"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        elif options.tail_lines is not None:
            params["tail"] = min(options.tail_lines, 5000)
        return self._chunks(self._client.stream_logs(view.id, params), options)

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
