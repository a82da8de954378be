"""Vast.ai adapter: rents one instance per pod by accepting an ask from the offer search.

The Provider plumbing is the adapter kit's (:class:`~vkprovider.plugins.api.CloudAdapter`:
identity map, per-UID locks, find-before-create, tolerant delete); this module holds Vast.ai's
part. Identity rests on the instance label (see :mod:`.mapping`). The list endpoint cannot filter
by label prefix, so a list pages through the account's instances and the kit filters them.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from contextlib import aclosing
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
    NotFound,
    Offer,
    Phase,
    cheapest_offer,
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


class VastAiProvider(CloudAdapter[InstanceView]):
    """``Provider`` + ``SupportsLogs`` (snapshot only) + ``SupportsEndpoints`` for Vast.ai, on the kit."""

    Settings: ClassVar[type[VastAiSettings]] = VastAiSettings
    kind = "Vast.ai instance"
    adapter = "vastai"
    version = __version__

    def __init__(
        self, name: str, settings: VastAiSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(name)
        self._settings = settings
        self._client = VastClient.from_settings(name, settings, transport=transport)

    async def probe(self) -> None:
        await self._client.list_instances(max_pages=1)

    async def offers(self) -> builtins.list[Offer]:
        offers = await self._search(bid=False)
        if self._settings.interruptible:
            offers.extend(await self._search(bid=True))
        return offers

    async def _search(self, *, bid: bool, extra: dict[str, Any] | None = None) -> builtins.list[Offer]:
        query = search_query(self._settings, bid=bid)
        query.update(extra or {})
        bundles = await self._client.search_offers(query)
        found = (offer_from_bundle(self._name, b, bid=bid, settings=self._settings) for b in bundles)
        return [offer for offer in found if offer is not None]

    # ---- the kit's hooks: Vast.ai's mapping --------------------------------------------------

    def identity(self, raw: Any) -> tuple[str, str] | None:
        return parse_label(raw.get("label") if isinstance(raw, dict) else None)

    def parse(self, raw: Any) -> InstanceView:
        return parse_instance(self._name, raw)

    def cloud_id(self, view: InstanceView) -> str:
        return str(view.id)

    def status(self, view: InstanceView) -> DeploymentStatus:
        return status_from_instance(self._name, view)

    async def fetch(self, cloud_id: str) -> Any:
        return await self._client.show_instance(cloud_id)

    async def fetch_all(self, node_name: str | None) -> builtins.list[Any]:
        # The list endpoint cannot filter by label prefix: every page, filtered by the kit.
        return await self._client.list_instances(self._settings.max_list_pages)

    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        if request.gpu_count < 1:
            raise InvalidRequest(
                "resources.limits[nvidia.com/gpu]: the Vast.ai adapter rents GPU instances only"
            )
        build_create_body(request, self._settings, None)  # reject unsupported input before any call
        ask = await self._choose(request)
        bid_price = await self._bid_price(ask) if ask.bid else None
        body = build_create_body(request, self._settings, bid_price)
        instance_id = str(await self._client.create_instance(ask.ask_id, body))
        return DeploymentStatus(
            uid=request.uid,
            phase=Phase.PENDING,
            node_name=request.node_name,
            provider_id=instance_id,
            offer_id=ask.offer_id,
            reason="Scheduling",
        )

    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> None:
        # The API terminates at once (no graceful stop to ask for): the grace period is unused.
        await self._client.destroy_instance(cloud_id)

    async def endpoints_of(self, uid: str, view: InstanceView) -> DeploymentEndpoints:
        """The instance's public address and Docker port mappings, read from the instance."""
        return endpoints_from_instance(uid, view)

    async def _choose(self, request: DeploymentRequest) -> Ask:
        """The placement's offer if it chose one of ours, else the cheapest matching offer now."""
        if request.offer_id:
            return Ask.parse(request.offer_id)
        best = cheapest_offer(await self._search(bid=request.spot), request)
        if best is None:
            wanted = f"{request.gpu_count} x {request.gpu_type or 'any GPU'}"
            raise NoCapacity(f"no Vast.ai offer for {wanted}", provider=self._name)
        return Ask.parse(best.offer_id)

    async def _bid_price(self, ask: Ask) -> float:
        """Current minimum bid of the ask x ``bid_multiplier`` (bids move, so read it now)."""
        offers = await self._search(bid=True, extra={"id": {"eq": ask.ask_id}})
        match = next((o for o in offers if o.offer_id == ask.offer_id), None)
        if match is None:
            raise NoCapacity(f"interruptible offer {ask.ask_id} is no longer listed", provider=self._name)
        return match.price_per_hour

    async def log_chunks(self, uid: str, view: InstanceView, options: LogOptions) -> AsyncIterator[bytes]:
        """A snapshot of the container log: Vast.ai uploads it and returns a URL; ``follow`` is not
        available, so the snapshot is returned and the stream ends."""
        body: dict[str, Any] = {}
        if options.tail_lines is not None:
            body["tail"] = str(options.tail_lines)
        url = await self._client.request_logs(str(view.id), body)
        for attempt in range(self._settings.log_fetch_attempts):
            async with self._client.log_snapshot(url) as snapshot:
                if snapshot is not None:  # streamed to the caller, never read whole
                    async with aclosing(snapshot):  # type: ignore[type-var]  # an async generator
                        async for chunk in snapshot:
                            yield chunk
                    return
            if attempt + 1 < self._settings.log_fetch_attempts:
                await asyncio.sleep(self._settings.log_fetch_interval_seconds)
        raise NotFound(f"log snapshot for uid {uid} was not uploaded in time", provider=self._name)

    async def close(self) -> None:
        await self._client.close()
