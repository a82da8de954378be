from __future__ import annotations

import pytest
from placement_support import Clock, MemProvider, offer, request

from vkprovider.placement import PlacementConfig, Placer, PodContext
from vkprovider.placement.config import ProviderPlacementConfig
from vkprovider.placement.health import ProviderHealth
from vkprovider.placement.score import provider_terms

CTX = PodContext("ns")


def test_terms_formula() -> None:
    cfg = PlacementConfig(
        providers={"a": ProviderPlacementConfig(discount=0.2, weight=1.5, startup_seconds=120)},
        restart_cost=2.0,
        startup_cost_per_minute=0.1,
    )
    health = ProviderHealth(["a"])
    health.record_call("a", False)
    health.record_call("a", True)
    t = provider_terms("a", cfg, health)
    assert t.failure_penalty == pytest.approx(1.0)  # 50 % failures x 2.0
    assert t.startup_penalty == pytest.approx(0.2)  # 2 minutes x 0.1
    assert t.score(10.0) == pytest.approx(1.5 * (10.0 * 0.8 + 1.0 + 0.2))


def test_observed_startup_overrides_config() -> None:
    cfg = PlacementConfig(default_startup_seconds=600, startup_cost_per_minute=1.0)
    health = ProviderHealth(["a"])
    assert provider_terms("a", cfg, health).startup_penalty == pytest.approx(10.0)
    health.record_startup("a", 60)
    assert provider_terms("a", cfg, health).startup_penalty == pytest.approx(1.0)


async def _rank(cfg: PlacementConfig, *providers: MemProvider, **req: object) -> list[tuple[str, str]]:
    placer = Placer({p.name: p for p in providers}, cfg, clock=Clock())
    await placer.refresh()
    decision = placer.rank(request(**req), CTX)  # type: ignore[arg-type]
    return [(c.provider, c.offer.offer_id) for c in decision.candidates]


async def test_discount_can_beat_a_lower_list_price() -> None:
    cfg = PlacementConfig(providers={"b": ProviderPlacementConfig(discount=0.5)}, startup_cost_per_minute=0)
    order = await _rank(
        cfg, MemProvider("a", [offer("a", "a1", 3.0)]), MemProvider("b", [offer("b", "b1", 4.0)])
    )
    assert order == [("b", "b1"), ("a", "a1")]


async def test_weight_disfavours() -> None:
    cfg = PlacementConfig(providers={"a": ProviderPlacementConfig(weight=2.0)})
    order = await _rank(
        cfg, MemProvider("a", [offer("a", "a1", 3.0)]), MemProvider("b", [offer("b", "b1", 4.0)])
    )
    assert order[0] == ("b", "b1")


async def test_failure_penalty_moves_a_flaky_provider_down() -> None:
    clock = Clock()
    a, b = MemProvider("a", [offer("a", "a1", 3.0)]), MemProvider("b", [offer("b", "b1", 3.5)])
    placer = Placer({"a": a, "b": b}, PlacementConfig(restart_cost=1.0), clock=clock)
    await placer.refresh()
    assert placer.rank(request(), CTX).candidates[0].provider == "a"
    placer.health.record_call("a", False)
    assert placer.rank(request(), CTX).candidates[0].provider == "b"  # cache invalidated by the health change
    clock.advance(601)  # outside the failure window: forgiven
    assert placer.rank(request(), CTX).candidates[0].provider == "a"


async def test_ties_break_on_excess_gpus_then_provider_then_offer_id() -> None:
    cfg = PlacementConfig()
    a = MemProvider("a", [offer("a", "z", 2.0, count=2), offer("a", "y", 2.0, count=4, region="r2")])
    b = MemProvider("b", [offer("b", "x", 2.0, count=2, region="r3")])
    c = MemProvider(
        "c", [offer("c", "w", 2.0, count=2, region="r4"), offer("c", "v", 2.0, count=2, region="r5")]
    )
    order = await _rank(cfg, c, b, a, count=2)
    assert order == [("a", "z"), ("b", "x"), ("c", "v"), ("c", "w"), ("a", "y")]


async def test_ranking_independent_of_provider_and_offer_order() -> None:
    offers_a = [offer("a", f"a{i}", 1.0 + (i % 3), region=f"r{i}") for i in range(6)]
    offers_b = [offer("b", f"b{i}", 1.0 + (i % 2), region=f"r{i}") for i in range(6)]
    first = await _rank(PlacementConfig(), MemProvider("a", offers_a), MemProvider("b", offers_b))
    second = await _rank(
        PlacementConfig(), MemProvider("b", offers_b[::-1]), MemProvider("a", offers_a[::-1])
    )
    assert first == second
