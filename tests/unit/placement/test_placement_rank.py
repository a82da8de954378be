from __future__ import annotations

from typing import Any

from placement_support import MemProvider, offer, placer_for, request

from vkprovider.errors import Transient
from vkprovider.placement import PlacementConfig, PodContext

CTX = PodContext("ns")


async def test_one_candidate_per_provider_gpu_region() -> None:
    a = MemProvider(
        "a",
        [offer("a", "a1", 1.0), offer("a", "a2", 1.5), offer("a", "a3", 2.0, region="eu")],
    )
    placer: Any = await placer_for(a)
    decision = placer.rank(request(), CTX)
    assert [c.offer.offer_id for c in decision.candidates] == ["a1", "a3"]
    assert decision.feasible == 3 and decision.total_offers == 3


async def test_pruning_keeps_exact_top_k_on_score_ties() -> None:
    # "a" fills the list first with excess-1 offers; "b" ties on score with less excess and must win.
    a = MemProvider(
        "a", [offer("a", "a1", 1.0, count=2, region="r1"), offer("a", "a2", 1.0, count=2, region="r2")]
    )
    b = MemProvider("b", [offer("b", "b1", 1.0, count=1, region="r1")])
    placer: Any = await placer_for(a, b, config=PlacementConfig(max_candidates=1, startup_cost_per_minute=0))
    decision = placer.rank(request(count=1), CTX)
    assert [c.offer.offer_id for c in decision.candidates] == ["b1"]


async def test_priced_out_offers_are_counted_unevaluated() -> None:
    offers = [offer("a", f"a{i}", 1.0 + i, region=f"r{i}") for i in range(10)]
    placer: Any = await placer_for(MemProvider("a", offers), config=PlacementConfig(max_candidates=2))
    decision = placer.rank(request(), CTX)
    assert [c.offer.offer_id for c in decision.candidates] == ["a0", "a1"]
    assert decision.unevaluated > 0
    assert decision.feasible + decision.unevaluated + sum(decision.rejected_counts.values()) == 10


async def test_max_price_rejects_rest_of_bucket_in_one_step() -> None:
    offers = [offer("a", f"a{i}", float(i + 1), region=f"r{i}") for i in range(5)]
    placer: Any = await placer_for(MemProvider("a", offers))
    decision = placer.rank(request(), PodContext("ns", {"vkprovider.io/max-price": "2"}))
    assert [c.offer.offer_id for c in decision.candidates] == ["a0", "a1"]
    assert decision.rejected_counts == {"max-price": 3}


async def test_detail_lists_every_rejected_offer_with_a_reason() -> None:
    a = MemProvider("a", [offer("a", "a1", 1.0, capacity=0), offer("a", "a2", 1.0, gpu="L4", region="eu")])
    b = MemProvider("b", [offer("b", "b1", 2.0)])
    placer: Any = await placer_for(a, b)
    placer.health.record_probe("b", False, "timeout")
    placer.health.record_probe("b", False, "timeout")
    decision = placer.rank(request(gpu="H100"), CTX, detail=True)
    assert decision.candidates == ()
    why = {(r.offer_id, r.code): r.reason for r in decision.rejections}
    assert why == {
        ("a1", "capacity"): "no capacity left",
        ("a2", "gpu-type"): "gpu L4 not in [H100-SXM-80GB]",
        ("b1", "unhealthy"): "provider unreachable: timeout",
    }
    assert decision.rejected_counts == {"capacity": 1, "gpu-type": 1, "unhealthy": 1}


async def test_stale_catalogs_are_used_and_reported() -> None:
    a = MemProvider("a", [offer("a", "a1", 1.0)])
    placer: Any = await placer_for(a)
    a.offers_error = Transient("boom")
    await placer.refresh()
    await placer.refresh()
    # Failed refreshes in a row are failed reachability checks, like failed probes ...
    decision = placer.rank(request(), CTX)
    assert decision.stale == ("a",) and decision.rejected_counts == {"unhealthy": 1}
    assert "offer refresh failed: Transient: boom" in placer.health.summary()["a"]["last_error"]
    # ... and once a probe reaches the provider again, the last catalog is used (fail open).
    placer.health.record_probe("a", True)
    decision = placer.rank(request(), CTX)
    assert decision.stale == ("a",) and decision.candidates[0].offer.offer_id == "a1"
    a.offers_error = None
    await placer.refresh()
    assert placer.rank(request(), CTX).stale == ()


async def test_provider_allow_list_from_config_and_pod() -> None:
    a, b, c = (MemProvider(n, [offer(n, f"{n}1", p)]) for n, p in (("a", 1.0), ("b", 2.0), ("c", 3.0)))
    placer: Any = await placer_for(a, b, c, config=PlacementConfig(providers_allow=["b", "c"]))
    assert [x.provider for x in placer.rank(request(), CTX).candidates] == ["b", "c"]
    only_c = PodContext("ns", {"vkprovider.io/providers": "a,c"})
    assert [x.provider for x in placer.rank(request(), only_c).candidates] == ["c"]


async def test_one_failed_refresh_of_a_flaky_cheap_provider_does_not_send_a_burst_to_the_dear_one() -> None:
    # krea-day: cheap ($2.10/h) fails 2 % of its API calls, premium costs $3.90/h. One 503 on an
    # offer refresh used to make cheap unreachable until its next probe or refresh succeeded, and
    # the burst placed in between went to premium (and stayed there, hysteresis).
    cheap = MemProvider("cheap", [offer("cheap", "c1", 2.10, capacity=6)])
    premium = MemProvider("premium", [offer("premium", "p1", 3.90, capacity=12)])
    placer: Any = await placer_for(cheap, premium)
    cheap.offers_error = Transient("503 Unavailable")
    await placer.refresh()
    decision = placer.rank(request(), CTX)
    assert [c.offer.provider for c in decision.candidates] == ["cheap", "premium"]
    assert placer.health.summary()["cheap"]["reachable"]
    # a second failure in a row is an outage, not a blip: no new pods until it answers again
    await placer.refresh()
    decision = placer.rank(request(), CTX)
    assert [c.offer.provider for c in decision.candidates] == ["premium"]
    cheap.offers_error = None
    await placer.refresh()
    assert placer.rank(request(), CTX).candidates[0].offer.provider == "cheap"
