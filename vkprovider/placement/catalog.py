"""Offer catalog: a cached, indexed copy of every provider's offers.

Refreshed per provider on a timer. A failed refresh keeps the last good catalog (fail open:
an hour-old price list beats placing nothing) and marks it stale with the error. Each outcome is
also a reachability signal for provider health (``on_refresh``), like the node agent's probes:
failed refreshes in a row make the provider unusable for new pods until a probe or refresh succeeds
(``placement.unreachable_after_failures``, :mod:`vkprovider.placement.health`). Capacity is
decremented optimistically as pods are placed, so a burst of pods does not all pick the last
unit of one offer, and corrected by the next refresh.

The index is built once per refresh so a decision never touches pydantic: offers are grouped
by normalized GPU type and sorted by (price, GPU count, offer id) inside each group.

The virtual nodes of one process share a provider's entry and its refresh
(:mod:`vkprovider.placement.shared_offers`): one fetch per provider, whatever its nodes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from vkprovider.models import Offer
from vkprovider.placement.blocklist import BlockKey, block_key
from vkprovider.placement.constraints import normalize_gpu
from vkprovider.placement.filters import gpu_memory_of
from vkprovider.placement.ratelimit import RateLimiters
from vkprovider.placement.types import PlacementTarget
from vkprovider.retry import Backoff


class SharedEntries(Protocol):
    """What a catalog needs of :class:`vkprovider.placement.shared_offers.SharedOffers`."""

    def join(self, name: str, catalog: Catalog) -> ProviderCatalog: ...

    def owns(self, catalog: Catalog, name: str) -> bool: ...

    async def refresh(self, name: str) -> bool: ...


log = logging.getLogger(__name__)


class IndexedOffer:
    """An offer flattened into slots for the ranker; ``capacity`` is ours to adjust."""

    __slots__ = (
        "block",
        "capacity",
        "count",
        "gpu",
        "group",
        "memory",
        "offer",
        "offer_id",
        "price",
        "region",
        "spot",
    )

    def __init__(self, offer: Offer) -> None:
        self.offer = offer
        self.offer_id = offer.offer_id
        self.gpu = normalize_gpu(offer.gpu_type)
        self.count = offer.gpu_count
        self.memory = gpu_memory_of(offer)
        self.region = offer.region
        self.spot = offer.spot
        self.price = offer.price_per_hour
        self.capacity = offer.capacity
        self.block: BlockKey = block_key(offer.provider, offer.gpu_type, offer.region)
        self.group = (self.gpu, self.region)  # one candidate per group: NoCapacity blocks it all


@dataclass(slots=True)
class ProviderCatalog:
    name: str
    offers: list[IndexedOffer] = field(default_factory=list)
    by_gpu: dict[str, list[IndexedOffer]] = field(default_factory=dict)
    by_id: dict[str, IndexedOffer] = field(default_factory=dict)
    fetched_at: float | None = None  # None: never refreshed successfully
    stale: bool = False
    error: str = ""

    def load(self, offers: list[Offer], now: float) -> None:
        by_id: dict[str, IndexedOffer] = {}
        for offer in offers:
            if offer.provider != self.name:  # the configured instance name is authoritative
                offer = offer.model_copy(update={"provider": self.name})
            by_id[offer.offer_id] = IndexedOffer(offer)  # a duplicated id keeps the last
        ordered = sorted(by_id.values(), key=lambda o: (o.price, o.count, o.offer_id))
        by_gpu: dict[str, list[IndexedOffer]] = {}
        for rec in ordered:
            by_gpu.setdefault(rec.gpu, []).append(rec)
        self.offers, self.by_gpu, self.by_id = ordered, by_gpu, by_id
        self.fetched_at, self.stale, self.error = now, False, ""


class Catalog:
    def __init__(
        self,
        providers: Mapping[str, PlacementTarget],
        *,
        refresh_seconds: float = 30.0,
        timeout_seconds: float = 10.0,
        limiters: RateLimiters | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_refresh: Callable[[str, bool, str | None], None] | None = None,
        shared: SharedEntries | None = None,
    ) -> None:
        """``shared``: the process's entries, shared with the other nodes' catalogs (module
        docstring); without it this catalog keeps and refreshes its own."""
        self._providers = dict(providers)
        self.on_refresh = on_refresh
        self.refresh_seconds = refresh_seconds
        self.timeout_seconds = timeout_seconds
        self._limiters = limiters
        self._clock = clock
        self._shared = shared
        self.providers: dict[str, ProviderCatalog] = {
            name: shared.join(name, self) if shared is not None else ProviderCatalog(name)
            for name in sorted(providers)
        }

    async def refresh(self, name: str) -> bool:
        """Refresh one provider; on failure keep the last catalog, mark it stale, return False."""
        if self._shared is not None:  # once for every node listing it
            return await self._shared.refresh(name)
        return await self.fetch(name, [self.on_refresh] if self.on_refresh is not None else [])

    async def fetch(self, name: str, listeners: list[Callable[[str, bool, str | None], None]]) -> bool:
        """Fetch and load one provider's offers, telling each of ``listeners`` the outcome."""
        entry = self.providers[name]
        try:
            if self._limiters is not None:
                await self._limiters.acquire(name)
            async with asyncio.timeout(self.timeout_seconds):
                offers = await self._providers[name].offers()
            entry.load(offers, self._clock())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any adapter failure: fail open to the last catalog
            entry.stale = True
            entry.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            log.warning(
                "offer refresh failed; keeping last catalog", extra={"provider": name, "error": entry.error}
            )
            for listener in listeners:
                listener(name, False, f"offer refresh failed: {entry.error}")
            return False
        for listener in listeners:
            listener(name, True, None)
        return True

    async def refresh_all(self) -> dict[str, bool]:
        names = list(self.providers)
        results = await asyncio.gather(*(self.refresh(n) for n in names))
        return dict(zip(names, results, strict=True))

    async def run(self, *, restart_delay: float = 1.0) -> None:
        """Refresh every provider on its timer until cancelled (a shared one: only in the
        catalog that owns its loop); crashed loops are restarted."""
        names = [n for n in self.providers if self._shared is None or self._shared.owns(self, n)]
        if not names:  # nothing to refresh, but behave like a loop: return only on cancel
            await asyncio.Event().wait()
        async with asyncio.TaskGroup() as group:
            for name in names:
                group.create_task(self._supervise(name, restart_delay), name=f"catalog-{name}")

    async def _supervise(self, name: str, restart_delay: float) -> None:
        backoff = Backoff(restart_delay, max(restart_delay, self.refresh_seconds))
        while True:
            try:
                while True:
                    await self.refresh(name)
                    backoff.reset()
                    await asyncio.sleep(self.refresh_seconds)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("catalog refresh loop crashed; restarting", extra={"provider": name})
                await asyncio.sleep(backoff.next())

    def take(self, provider: str, offer_id: str) -> None:
        """A pod was placed on this offer: one unit less until the next refresh says otherwise."""
        rec = self._find(provider, offer_id)
        if rec is not None and rec.capacity > 0:
            rec.capacity -= 1

    def give_back(self, provider: str, offer_id: str) -> None:
        rec = self._find(provider, offer_id)
        if rec is not None:
            rec.capacity += 1

    def offer(self, provider: str, offer_id: str) -> Offer | None:
        rec = self._find(provider, offer_id)
        return None if rec is None else rec.offer

    def capacity(self, provider: str, offer_id: str) -> int | None:
        rec = self._find(provider, offer_id)
        return None if rec is None else rec.capacity

    def _find(self, provider: str, offer_id: str) -> IndexedOffer | None:
        entry = self.providers.get(provider)
        return None if entry is None else entry.by_id.get(offer_id)

    def stale(self) -> tuple[str, ...]:
        return tuple(n for n, c in self.providers.items() if c.stale or c.fetched_at is None)
