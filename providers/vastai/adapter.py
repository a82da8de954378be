"""Vast.ai adapter: rents one instance per pod by accepting an ask from the offer search.

Idempotency and scoping rest on the instance label (see :mod:`.mapping`). The list endpoint
cannot filter by label prefix, so ``list`` pages through the account's instances and filters
here; ``get`` reads one instance by a cached uid → id and falls back to the list.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
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
    Phase,
    ProviderInfo,
    UidLocks,
    limit_bytes,
    normalize_gpu,
)

from . import __version__
from .client import VastClient
from .mapping import (
    Ask,
    InstanceView,
    build_create_body,
    endpoints_from_instance,
    offer_from_bundle,
    parse_instance,
    parse_label,
    search_query,
    status_from_instance,
)
from .settings import VastAiSettings

log = logging.getLogger(__name__)


class VastAiProvider:
    """``Provider`` + ``SupportsLogs`` (snapshot only) for Vast.ai."""

    Settings: ClassVar[type[VastAiSettings]] = VastAiSettings

    def __init__(
        self, name: str, settings: VastAiSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._name = name
        self._settings = settings
        self._key = ApiKeySource.from_settings(name, settings)
        self._client = VastClient(
            name,
            base_url=settings.base_url,
            key=self._key,
            timeout=settings.timeout_seconds,
            max_connections=settings.max_connections,
            log_max_connections=settings.log_max_connections,
            transport=transport,
        )
        self._ids: dict[str, str] = {}  # pod uid → instance id
        self._deploy_locks = UidLocks()

    def __repr__(self) -> str:
        return f"VastAiProvider(name={self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name,
            adapter="vastai",
            version=__version__,
            capabilities=Capabilities(logs=True, endpoints=True),
        )

    async def probe(self) -> None:
        await self._client.list_instances(max_pages=1)

    async def offers(self) -> list[Offer]:
        offers = await self._search(bid=False)
        if self._settings.interruptible:
            offers.extend(await self._search(bid=True))
        return offers

    async def _search(self, *, bid: bool, extra: dict[str, Any] | None = None) -> list[Offer]:
        query = search_query(self._settings, bid=bid)
        query.update(extra or {})
        bundles = await self._client.search_offers(query)
        found = (offer_from_bundle(self._name, b, bid=bid, settings=self._settings) for b in bundles)
        return [offer for offer in found if offer is not None]

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        async with self._deploy_locks.lock(request.uid):
            try:
                return await self.get(request.uid)
            except NotFound:
                pass
            if request.gpu_count < 1:
                raise InvalidRequest(
                    "resources.limits[nvidia.com/gpu]: the Vast.ai adapter rents GPU instances only"
                )
            build_create_body(request, self._settings, None)  # reject unsupported input before any call
            ask = await self._choose(request)
            bid_price = await self._bid_price(ask) if ask.bid else None
            body = build_create_body(request, self._settings, bid_price)
            instance_id = str(await self._client.create_instance(ask.ask_id, body))
            self._ids[request.uid] = instance_id
            log.info("provider %s: created instance %s for uid %s", self._name, instance_id, request.uid)
            return DeploymentStatus(
                uid=request.uid,
                phase=Phase.PENDING,
                node_name=request.node_name,
                provider_id=instance_id,
                offer_id=ask.offer_id,
                reason="Scheduling",
            )

    async def _choose(self, request: DeploymentRequest) -> Ask:
        """The placement's offer if it chose one of ours, else the cheapest matching offer now."""
        if request.offer_id:
            return Ask.parse(request.offer_id)
        candidates = [
            offer
            for offer in await self._search(bid=request.spot)
            if offer.capacity > 0
            and offer.gpu_count == request.gpu_count
            and (request.gpu_type is None or _same_gpu(offer.gpu_type, request.gpu_type))
            and (not request.region or offer.region == request.region)
        ]
        if not candidates:
            wanted = f"{request.gpu_count} x {request.gpu_type or 'any GPU'}"
            raise NoCapacity(f"no Vast.ai offer for {wanted}", provider=self._name)
        return Ask.parse(min(candidates, key=lambda o: (o.price_per_hour, o.offer_id)).offer_id)

    async def _bid_price(self, ask: Ask) -> float:
        """Current minimum bid of the ask x ``bid_multiplier`` (bids move, so read it now)."""
        offers = await self._search(bid=True, extra={"id": {"eq": ask.ask_id}})
        match = next((o for o in offers if o.offer_id == ask.offer_id), None)
        if match is None:
            raise NoCapacity(f"interruptible offer {ask.ask_id} is no longer listed", provider=self._name)
        return match.price_per_hour

    async def get(self, uid: str) -> DeploymentStatus:
        return status_from_instance(self._name, await self._find(uid))

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        """The instance's public address and Docker port mappings, read from the instance."""
        return endpoints_from_instance(uid, await self._find(uid))

    async def _find(self, uid: str) -> InstanceView:
        """The instance for ``uid``: by its cached id, else by listing; ``NotFound`` if none."""
        instance_id = self._ids.get(uid)
        if instance_id is not None:
            try:
                raw = await self._client.show_instance(instance_id)
            except NotFound:
                self._ids.pop(uid, None)
            else:
                found = parse_label(raw.get("label") if isinstance(raw, dict) else None)
                if found is not None and found[0] == uid:
                    return parse_instance(self._name, raw)
                self._ids.pop(uid, None)
        for raw in await self._client.list_instances(self._settings.max_list_pages):
            found = parse_label(raw.get("label") if isinstance(raw, dict) else None)
            if found is not None and found[0] == uid:
                instance = parse_instance(self._name, raw)
                self._ids[uid] = str(instance.id)
                return instance
        raise NotFound(f"no Vast.ai instance for uid {uid}", provider=self._name)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        statuses: list[DeploymentStatus] = []
        for raw in await self._client.list_instances(self._settings.max_list_pages):
            found = parse_label(raw.get("label") if isinstance(raw, dict) else None)
            if found is None or found[1] != node_name:
                continue
            instance = parse_instance(self._name, raw)
            self._ids[found[0]] = str(instance.id)
            statuses.append(status_from_instance(self._name, instance))
        return statuses

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        # The API terminates at once (no graceful stop to ask for): the grace period is unused.
        try:
            status = await self.get(uid)
        except NotFound:
            return
        await self._client.destroy_instance(status.provider_id)
        self._ids.pop(uid, None)
        self._deploy_locks.discard(uid)
        log.info("provider %s: destroyed instance %s for uid %s", self._name, status.provider_id, uid)

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        """A snapshot of the container log: Vast.ai uploads it and returns a URL; ``follow`` is not
        available, so the snapshot is returned and the stream ends."""
        status = await self.get(uid)
        body: dict[str, Any] = {}
        if options.tail_lines is not None:
            body["tail"] = str(options.tail_lines)
        url = await self._client.request_logs(status.provider_id, body)
        for attempt in range(self._settings.log_fetch_attempts):
            async with self._client.log_snapshot(url) as snapshot:
                if snapshot is not None:  # streamed to the caller, never read whole
                    async with aclosing(limit_bytes(snapshot, options.limit_bytes)) as chunks:
                        async for chunk in chunks:
                            yield chunk
                    return
            if attempt + 1 < self._settings.log_fetch_attempts:
                await asyncio.sleep(self._settings.log_fetch_interval_seconds)
        raise NotFound(f"log snapshot for uid {uid} was not uploaded in time", provider=self._name)

    async def close(self) -> None:
        await self._client.close()


def _same_gpu(offered: str, wanted: str) -> bool:
    return offered.upper() == wanted.upper() or offered.upper() == normalize_gpu(wanted).upper()
