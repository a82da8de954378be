"""Nodes of one process sharing a provider fetch its offers once (``placement.shared_offers``):
one fetch for all, one refresh loop (in the first catalog to list it), every node's health told
the outcome, and one capacity count for the offer."""

from __future__ import annotations

import asyncio
import contextlib

from placement_support import Clock, MemProvider, offer

from vkprovider.errors import Transient
from vkprovider.models import Offer
from vkprovider.placement import PlacementConfig, Placer
from vkprovider.placement.shared_offers import SharedOffers


class Counting(MemProvider):
    """Counts catalog calls; ``hold`` keeps each call open until set (a fetch in flight)."""

    def __init__(self, name: str, price: float) -> None:
        super().__init__(name, [offer(name, f"{name}-h100", price, capacity=2)])
        self.calls = 0
        self.hold = asyncio.Event()
        self.hold.set()

    async def offers(self) -> list[Offer]:
        self.calls += 1
        await self.hold.wait()
        return await super().offers()


def nodes(shared: Counting, own: Counting, config: PlacementConfig | None = None) -> tuple[Placer, Placer]:
    """Node a lists ``shared`` and ``own``, node b ``shared`` only, over one ``SharedOffers``."""
    offers = SharedOffers()
    a = Placer({shared.name: shared, own.name: own}, config, clock=Clock(), offers=offers)
    b = Placer({shared.name: shared}, config, clock=Clock(), limiters=a.limiters, offers=offers)
    return a, b


async def test_concurrent_refreshes_of_a_shared_provider_make_one_fetch_for_all() -> None:
    shared, own = Counting("one", 1.0), Counting("two", 2.0)
    a, b = nodes(shared, own)
    shared.hold.clear()
    both = asyncio.gather(a.refresh(), b.refresh())
    await asyncio.sleep(0.01)  # both nodes are waiting on the one fetch in flight
    shared.hold.set()
    assert await both == [{"one": True, "two": True}, {"one": True}]
    assert (shared.calls, own.calls) == (1, 1)
    assert a.catalog.providers["one"] is b.catalog.providers["one"]
    assert b.catalog.stale() == ()  # b's view was loaded by the fetch it joined
    await b.refresh()  # nothing in flight now: a fresh fetch, for both
    assert shared.calls == 2


async def test_only_the_owning_catalog_runs_a_shared_providers_loop() -> None:
    shared, own = Counting("one", 1.0), Counting("two", 2.0)
    config = PlacementConfig.model_validate({"offer_refresh_seconds": 0.001})
    a, b = nodes(shared, own, config)
    loop = asyncio.create_task(b.catalog.run())  # b lists "one" but a owns its refresh
    await asyncio.sleep(0.05)
    assert shared.calls == 0
    loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loop
    loop = asyncio.create_task(a.catalog.run())
    async with asyncio.timeout(10):
        while shared.calls < 3 or own.calls < 3:  # the owner refreshes both on its timer
            await asyncio.sleep(0.005)
    loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loop


async def test_every_node_listing_the_provider_hears_a_failed_refresh() -> None:
    shared, own = Counting("one", 1.0), Counting("two", 2.0)
    config = PlacementConfig.model_validate({"unreachable_after_failures": 2})
    a, b = nodes(shared, own, config)
    shared.offers_error = Transient("502 from upstream")
    await a.refresh()
    await b.refresh()
    assert shared.calls == 2
    for placer in (a, b):
        assert placer.health.unusable_reason("one") is not None, placer.health.summary()
    assert a.health.unusable_reason("two") is None  # own provider: a's own view, still fine


async def test_capacity_taken_on_one_node_is_gone_for_the_other() -> None:
    shared, own = Counting("one", 1.0), Counting("two", 2.0)
    a, b = nodes(shared, own)
    await a.refresh()
    a.catalog.take("one", "one-h100")
    assert b.catalog.capacity("one", "one-h100") == 1
    b.catalog.take("one", "one-h100")
    assert a.catalog.capacity("one", "one-h100") == 0  # nobody picks the last unit twice
