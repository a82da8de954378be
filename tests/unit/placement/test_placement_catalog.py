from __future__ import annotations

import asyncio

from placement_support import Clock, MemProvider, offer, request

from vkprovider.errors import Transient
from vkprovider.placement import PlacementConfig, Placer, PodContext
from vkprovider.placement.catalog import Catalog


async def test_failed_refresh_keeps_last_catalog_and_marks_stale() -> None:
    p = MemProvider("a", [offer("a", "a1", 1.0)])
    cat = Catalog({"a": p}, clock=Clock())
    assert cat.stale() == ("a",)  # never refreshed
    assert await cat.refresh("a")
    assert cat.stale() == ()
    p.offers_error = Transient("502 from upstream")
    assert not await cat.refresh("a")
    entry = cat.providers["a"]
    assert entry.stale and "502 from upstream" in entry.error
    assert [o.offer_id for o in entry.offers] == ["a1"]  # fail open: last good catalog
    p.offers_error = None
    p.catalog = [offer("a", "a2", 2.0)]
    assert await cat.refresh("a")
    assert not entry.stale and entry.error == "" and [o.offer_id for o in entry.offers] == ["a2"]


async def test_malformed_catalog_is_a_failed_refresh() -> None:
    p = MemProvider("a", [offer("a", "a1", 1.0)])
    cat = Catalog({"a": p}, clock=Clock())
    await cat.refresh("a")
    p.catalog = [object()]  # type: ignore[list-item]
    assert not await cat.refresh("a")
    assert [o.offer_id for o in cat.providers["a"].offers] == ["a1"]


async def test_hanging_provider_times_out() -> None:
    class Hang(MemProvider):
        async def offers(self):  # type: ignore[no-untyped-def]
            await asyncio.Event().wait()

    cat = Catalog({"a": Hang("a")}, timeout_seconds=0.01, clock=Clock())
    assert not await asyncio.wait_for(cat.refresh("a"), timeout=5)
    assert "TimeoutError" in cat.providers["a"].error


async def test_offer_provider_name_is_the_configured_instance_name() -> None:
    cat = Catalog({"cheap": MemProvider("cheap", [offer("fakecloud", "o1", 1.0)])}, clock=Clock())
    await cat.refresh_all()
    assert cat.offer("cheap", "o1") is not None and cat.offer("cheap", "o1").provider == "cheap"  # type: ignore[union-attr]


async def test_capacity_decrements_optimistically_and_refresh_corrects() -> None:
    p = MemProvider("a", [offer("a", "a1", 1.0, capacity=2), offer("a", "a2", 5.0, capacity=2)])
    placer = Placer({"a": p}, PlacementConfig(), clock=Clock())
    await placer.refresh()
    ctx = PodContext("ns")
    for uid in ("u1", "u2"):
        placed = await placer.deploy(request(uid), ctx)
        assert placed.offer.offer_id == "a1"
    assert placer.catalog.capacity("a", "a1") == 0
    placed = await placer.deploy(request("u3"), ctx)  # a1 is used up as far as we know
    assert placed.offer.offer_id == "a2"
    await placer.refresh()  # the provider's own figure wins
    assert placer.catalog.capacity("a", "a1") == 2
    placer.release("u3")
    assert placer.catalog.capacity("a", "a2") == 3  # optimistic give-back, corrected on refresh


async def test_supervised_loop_restarts_after_a_crash() -> None:
    p = MemProvider("a", [offer("a", "a1", 1.0)])
    cat = Catalog({"a": p}, refresh_seconds=0.001, clock=Clock())
    calls = 0
    real = cat.refresh

    async def flaky(name: str) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug in the loop")
        return await real(name)

    cat.refresh = flaky  # type: ignore[method-assign]
    task = asyncio.create_task(cat.run(restart_delay=0.001))
    try:
        async with asyncio.timeout(5):
            while cat.providers["a"].fetched_at is None:
                await asyncio.sleep(0.001)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert calls >= 2 and not cat.providers["a"].stale
