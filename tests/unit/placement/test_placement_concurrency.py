"""Budgets, spread and capacity hold under concurrent deploys (many workers, slow providers)."""

from __future__ import annotations

import asyncio
from typing import Any

from placement_support import MemProvider, offer, placer_for, request

from vkprovider.errors import NoCapacity
from vkprovider.placement import NotPlaced, Placement, PlacementConfig, PodContext


def slow(name: str, price: float, *, capacity: int = 100, seconds: float = 0.01) -> MemProvider:
    provider = MemProvider(name, [offer(name, f"{name}-1", price, capacity=capacity)])
    provider.deploy_seconds = seconds
    return provider


async def place_many(placer: Any, n: int, ctx: PodContext) -> list[Placement | BaseException]:
    return await asyncio.gather(
        *(placer.deploy(request(f"u{i}"), ctx) for i in range(n)), return_exceptions=True
    )


def spend(*providers: MemProvider) -> float:
    prices = {o.offer_id: o.price_per_hour for p in providers for o in p.catalog}
    return sum(prices[s.offer_id] for p in providers for s in p.deployments.values())


async def test_concurrent_deploys_never_exceed_the_namespace_budget() -> None:
    cheap, mid = slow("cheap", 1.0), slow("mid", 1.5)
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(namespace_budgets={"ns": 2.0}))
    results = await place_many(placer, 16, PodContext("ns"))
    placed = [r for r in results if isinstance(r, Placement)]
    refused = [r for r in results if isinstance(r, NotPlaced)]
    assert len(placed) == 2 and len(refused) == 14
    assert {r.reason for r in refused} == {"BudgetExceeded"}
    assert spend(cheap, mid) <= 2.0 and placer.budgets.spent("ns") == spend(cheap, mid)


async def test_concurrent_deploys_respect_the_spread_share() -> None:
    cheap, mid = slow("cheap", 1.0), slow("mid", 2.0)
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(spread_max_share=0.5))
    results = await place_many(placer, 4, PodContext("ns", workload="rs-1"))
    assert all(isinstance(r, Placement) for r in results)
    assert (len(cheap.deployments), len(mid.deployments)) == (2, 2)


async def test_concurrent_deploys_do_not_oversell_an_offer() -> None:
    cheap, mid = slow("cheap", 1.0, capacity=2), slow("mid", 2.0)
    placer: Any = await placer_for(cheap, mid)
    results = await place_many(placer, 5, PodContext("ns"))
    assert all(isinstance(r, Placement) for r in results)
    assert (len(cheap.deployments), len(mid.deployments)) == (2, 3)
    assert placer.catalog.capacity("cheap", "cheap-1") == 0


async def test_a_failed_deploy_gives_its_reservation_back() -> None:
    cheap, mid = slow("cheap", 1.0, seconds=0.05), slow("mid", 1.0)
    cheap.failures = [NoCapacity("sold out")]
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(namespace_budgets={"ns": 1.0}))
    first = asyncio.create_task(placer.deploy(request("u1"), PodContext("ns")))
    while not cheap.deploy_calls:
        await asyncio.sleep(0)
    # While u1's call is in flight its share is held: u2 cannot have the budget.
    try:
        await placer.deploy(request("u2"), PodContext("ns"))
        raise AssertionError("u2 was placed while u1 held the whole budget")
    except NotPlaced as exc:
        assert exc.reason == "BudgetExceeded"
    placed = await first  # cheap refused; the share moved with u1 to mid
    assert placed.provider == "mid" and placer.budgets.spent("ns") == 1.0
    assert placer.catalog.capacity("cheap", "cheap-1") == 100  # the unit taken on cheap came back
    placer.release("u1")
    assert placer.budgets.spent("ns") == 0.0
