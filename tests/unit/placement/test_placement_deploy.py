"""Placer.deploy failover with real in-memory providers and a manual clock."""

from __future__ import annotations

from typing import Any

import pytest
from placement_support import Clock, MemProvider, offer, placer_for, request

from vkprovider.errors import (
    InvalidRequest,
    NoCapacity,
    QuotaOrBilling,
    Transient,
    Unschedulable,
    Unsupported,
)
from vkprovider.placement import NotPlaced, PlacementConfig, Placer, PodContext
from vkprovider.placement.blocklist import block_key

CTX = PodContext("ns")


def three(**failures: list[BaseException]) -> tuple[MemProvider, MemProvider, MemProvider]:
    return (
        MemProvider("cheap", [offer("cheap", "c1", 1.0, region="us")], failures.get("cheap", [])),
        MemProvider("mid", [offer("mid", "m1", 2.0, region="eu")], failures.get("mid", [])),
        MemProvider("dear", [offer("dear", "d1", 3.0, region="ap")], failures.get("dear", [])),
    )


async def test_deploys_cheapest_with_request_copied_from_the_offer() -> None:
    cheap, mid, dear = three()
    cheap.catalog = [offer("cheap", "c1", 1.0, gpu="H100-SXM-80GB", region="us", spot=True)]
    placer: Any = await placer_for(cheap, mid, dear)
    placed = await placer.deploy(request(gpu="H100"), CTX)
    assert (placed.provider, placed.offer.offer_id) == ("cheap", "c1")
    sent = cheap.deploy_calls[0]
    assert (sent.offer_id, sent.region, sent.spot, sent.gpu_type) == ("c1", "us", True, "H100-SXM-80GB")
    assert placed.decision.chosen is not None and placed.decision.chosen.provider == "cheap"
    assert placed.warnings == [] and mid.deploy_calls == []


async def test_no_capacity_blocklists_and_moves_on_at_once() -> None:
    clock = Clock()
    cheap, mid, dear = three(cheap=[NoCapacity("sold out")])
    placer: Any = await placer_for(
        cheap, mid, dear, clock=clock, config=PlacementConfig(blocklist_ttl_seconds=60)
    )
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "mid"
    assert clock.slept == []  # no waiting on NoCapacity
    assert placer.blocklist.is_blocked(block_key("cheap", "H100-SXM-80GB", "us"))
    assert placed.warnings[0][0] == "ProviderNoCapacity"
    assert [(a.provider, a.outcome) for a in placed.decision.attempts] == [
        ("cheap", "NoCapacity"),
        ("mid", "ok"),
    ]
    # The next pod skips the blocklisted triple without calling it ...
    placed = await placer.deploy(request("u2"), CTX)
    assert placed.provider == "mid" and len(cheap.deploy_calls) == 1
    # ... until the TTL passes.
    clock.advance(61)
    assert (await placer.deploy(request("u3"), CTX)).provider == "cheap"


async def test_transient_is_retried_with_backoff_honouring_retry_after() -> None:
    clock = Clock()
    cheap, mid, dear = three(cheap=[Transient("429", retry_after=3.0), Transient("503")])
    cfg = PlacementConfig(transient_attempts=3, transient_backoff_seconds=0.5)
    placer: Any = await placer_for(cheap, mid, dear, clock=clock, config=cfg)
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "cheap" and len(cheap.deploy_calls) == 3
    assert clock.slept[0] >= 3.0  # retry_after honoured
    assert clock.slept[1] == pytest.approx(1.0)  # exponential: 0.5 * 2


async def test_transient_exhausted_moves_to_next_candidate() -> None:
    cheap, mid, dear = three(cheap=[Transient("x")] * 5)
    placer: Any = await placer_for(cheap, mid, dear, config=PlacementConfig(transient_attempts=2))
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "mid" and len(cheap.deploy_calls) == 2
    assert placer.health.failure_rate("cheap") == 1.0
    assert not placer.blocklist.is_blocked(block_key("cheap", "H100-SXM-80GB", "us"))


async def test_long_retry_after_is_not_waited_for() -> None:
    clock = Clock()
    cheap, mid, dear = three(cheap=[Transient("slow down", retry_after=3600)])
    placer: Any = await placer_for(cheap, mid, dear, clock=clock)
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "mid" and clock.slept == [] and len(cheap.deploy_calls) == 1


async def test_quota_or_billing_disables_provider_with_a_warning() -> None:
    cheap, mid, dear = three(cheap=[QuotaOrBilling("card declined")])
    placer: Any = await placer_for(cheap, mid, dear)
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "mid"
    assert placer.health.disabled("cheap")
    assert placed.warnings == [("ProviderDisabled", "cheap disabled (quota or billing): card declined")]
    decision = placer.rank(request("u2"), CTX)
    assert "cheap" not in [c.provider for c in decision.candidates]
    assert decision.rejected_counts["disabled"] == 1
    placer.health.enable("cheap")
    assert placer.rank(request("u2"), CTX).candidates[0].provider == "cheap"


async def test_one_providers_refusal_tries_the_next_candidate() -> None:
    """One plugin's version skew (UNIMPLEMENTED reads as ``Unsupported``) or one cloud's own
    validation must not fail a pod that another provider runs."""
    cheap, mid, dear = three(cheap=[Unsupported("Deploy: method not implemented")])
    cheap.catalog.append(offer("cheap", "c2", 1.5, region="eu"))  # skipped: cheap refused the request
    placer: Any = await placer_for(cheap, mid, dear)
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "mid" and len(cheap.deploy_calls) == 1
    assert [a.outcome for a in placed.decision.attempts] == ["Unsupported", "ok"]
    assert [w[0] for w in placed.warnings] == ["ProviderRefused"]
    assert not placer.health.disabled("cheap")  # a refusal is about the request, not the provider


async def test_pod_fails_only_when_every_candidate_refused_it() -> None:
    cheap, mid, dear = three(
        cheap=[InvalidRequest("image name invalid")],
        mid=[InvalidRequest("bad image", reason="InvalidImageName")],
        dear=[Unsupported("no such method")],
    )
    placer: Any = await placer_for(cheap, mid, dear)
    with pytest.raises(InvalidRequest) as info:
        await placer.deploy(request(), CTX)
    assert type(info.value) is InvalidRequest and info.value.reason == "InvalidRequest"
    assert "cheap: image name invalid" in info.value.message and "dear: no such method" in info.value.message
    assert [len(p.deploy_calls) for p in (cheap, mid, dear)] == [1, 1, 1]


async def test_every_candidate_unsupported_keeps_the_class_and_reason() -> None:
    cheap, mid, dear = three(cheap=[Unsupported("a")], mid=[Unsupported("b")], dear=[Unsupported("c")])
    with pytest.raises(Unsupported) as info:
        await (await placer_for(cheap, mid, dear)).deploy(request(), CTX)
    assert info.value.reason == "Unsupported"


async def test_a_refusal_among_other_failures_keeps_the_pod_pending() -> None:
    cheap, mid, dear = three(cheap=[InvalidRequest("x")], mid=[NoCapacity("y")], dear=[NoCapacity("z")])
    with pytest.raises(NotPlaced) as info:
        await (await placer_for(cheap, mid, dear)).deploy(request(), CTX)
    assert info.value.reason == "AllProvidersFailed"


async def test_a_single_refusal_fails_the_pod_with_it_as_it_was() -> None:
    only = MemProvider("only", [offer("only", "o1", 1.0)], [InvalidRequest("no", reason="InvalidImageName")])
    with pytest.raises(InvalidRequest) as info:
        await (await placer_for(only)).deploy(request(), CTX)
    assert (info.value.message, info.value.reason) == ("no", "InvalidImageName")


async def test_invalid_annotation_fails_at_once() -> None:
    placer: Any = await placer_for(*three())
    with pytest.raises(InvalidRequest) as info:
        await placer.deploy(request(), PodContext("ns", {"vkprovider.io/max-price": "free"}))
    assert info.value.reason == "InvalidAnnotation"


async def test_unexpected_adapter_exception_is_treated_as_transient() -> None:
    cheap, mid, dear = three(cheap=[KeyError("bug")])
    placer: Any = await placer_for(cheap, mid, dear, config=PlacementConfig(transient_attempts=1))
    placed = await placer.deploy(request(), CTX)
    assert placed.provider == "mid" and placed.decision.attempts[0].outcome == "Transient"


async def test_all_failing_raises_unschedulable_all_providers_failed() -> None:
    cheap, mid, dear = three(cheap=[NoCapacity("x")], mid=[NoCapacity("y")], dear=[QuotaOrBilling("z")])
    placer: Any = await placer_for(cheap, mid, dear)
    with pytest.raises(Unschedulable) as info:
        await placer.deploy(request(), CTX)
    assert info.value.reason == "AllProvidersFailed"
    assert isinstance(info.value, NotPlaced) and len(info.value.decision.attempts) == 3
    assert [w[0] for w in info.value.warnings] == [
        "ProviderNoCapacity",
        "ProviderNoCapacity",
        "ProviderDisabled",
    ]


async def test_max_attempts_bounds_one_deploy() -> None:
    cheap, mid, dear = three(cheap=[NoCapacity("x")], mid=[NoCapacity("y")])
    placer: Any = await placer_for(cheap, mid, dear, config=PlacementConfig(max_attempts=2))
    with pytest.raises(NotPlaced) as info:
        await placer.deploy(request(), CTX)
    assert dear.deploy_calls == [] and info.value.reason == "AllProvidersFailed"


async def test_no_candidates() -> None:
    placer: Any = await placer_for(*three())
    with pytest.raises(NotPlaced) as info:
        await placer.deploy(request(gpu="B200"), CTX)
    assert info.value.reason == "NoCandidates" and "gpu-type: 3" in info.value.message


async def test_budget_exceeded_keeps_pod_pending_and_release_frees_it() -> None:
    cfg = PlacementConfig(namespace_budgets={"ns": 2.5})
    placer: Any = await placer_for(*three(), config=cfg)
    assert (await placer.deploy(request("u1"), CTX)).provider == "cheap"  # 1.0 of 2.5
    with pytest.raises(NotPlaced) as info:  # cheapest left is 2.0 > 1.5
        await placer.deploy(
            request("u2", gpu="H100"), PodContext("ns", {"vkprovider.io/providers-deny": "cheap"})
        )
    assert info.value.reason == "BudgetExceeded" and "budget" in info.value.message
    assert (await placer.deploy(request("u3"), CTX)).provider == "cheap"  # 1.0 still fits
    placer.release("u1")
    placer.release("u3")
    denied = PodContext("ns", {"vkprovider.io/providers-deny": "cheap"})
    assert (await placer.deploy(request("u2"), denied)).provider == "mid"
    assert placer.budgets.spent("ns") == 2.0
    assert (await placer.deploy(request("x"), PodContext("other"))).provider == "cheap"  # other ns: no cap


async def test_circuit_open_stops_new_placements() -> None:
    clock = Clock()
    providers = three()
    placer: Any = await placer_for(*providers, clock=clock, config=PlacementConfig(breaker_seconds=30))
    for p in providers:
        placer.health.record_probe(p.name, False, "down")
        placer.health.record_probe(p.name, False, "still down")
    clock.advance(31)
    with pytest.raises(NotPlaced) as info:
        await placer.deploy(request(), CTX)
    assert info.value.reason == "CircuitOpen"
    assert all(p.deploy_calls == [] for p in providers)
    placer.health.record_probe("dear", True)
    assert (await placer.deploy(request(), CTX)).provider == "dear"  # only dear is reachable


async def test_hysteresis_keeps_a_running_pod_where_it_is() -> None:
    cheap, mid, dear = three()
    placer: Any = await placer_for(cheap, mid, dear)
    ctx = PodContext("ns", current_provider="dear", current_offer="d1")
    decision = placer.rank(request(), ctx)
    assert decision.candidates[0].provider == "dear" and decision.candidates[0].current
    placed = await placer.deploy(request(), ctx)
    assert placed.provider == "dear" and cheap.deploy_calls == []
    assert placer.catalog.capacity("dear", "d1") == 5  # it already held that capacity


async def test_hysteresis_ignores_capacity_and_blocklist_of_the_current_provider() -> None:
    cheap, mid, dear = three()
    dear.catalog = [offer("dear", "d1", 3.0, region="ap", capacity=0)]
    placer: Any = await placer_for(cheap, mid, dear)
    placer.blocklist.add("dear", "H100-SXM-80GB", "ap", "full")
    decision = placer.rank(request(), PodContext("ns", current_provider="dear"))
    assert decision.candidates[0].provider == "dear"


async def test_spread_caps_share_per_provider() -> None:
    cfg = PlacementConfig(spread_max_share=0.5)
    placer: Any = await placer_for(*three(), config=cfg)
    ctx = PodContext("ns", workload="rs-1")
    got = [(await placer.deploy(request(f"u{i}"), ctx)).provider for i in range(4)]
    assert got == ["cheap", "mid", "cheap", "mid"]
    placer.release("u0")
    placer.release("u2")
    assert (await placer.deploy(request("u5"), ctx)).provider == "cheap"


async def test_redeploy_of_same_uid_does_not_double_count() -> None:
    placer: Any = await placer_for(*three(), config=PlacementConfig(namespace_budgets={"ns": 1.5}))
    await placer.deploy(request("u1"), CTX)
    await placer.deploy(request("u1"), CTX)
    assert placer.budgets.spent("ns") == 1.0
    assert placer.catalog.capacity("cheap", "c1") == 4


async def test_adopt_records_existing_deployments() -> None:
    placer: Any = await placer_for(*three(), config=PlacementConfig(namespace_budgets={"ns": 2.0}))
    placer.adopt("old", PodContext("ns", workload="w"), "mid", offer_id="m1")
    assert placer.budgets.spent("ns") == 2.0 and placer.placed("old") == ("mid", "m1")
    with pytest.raises(NotPlaced):
        await placer.deploy(request("new"), CTX)


def test_placer_defaults_build_without_io() -> None:
    placer = Placer({}, None)
    assert placer.summary()["breaker_open"] is False


async def test_a_placed_uid_is_not_deployed_twice_elsewhere() -> None:
    cheap, mid, dear = three()
    placer: Any = await placer_for(mid, dear, cheap)
    cheap.catalog = []
    await placer.refresh()
    assert (await placer.deploy(request("u1"), CTX)).provider == "mid"
    cheap.catalog = [offer("cheap", "c1", 0.1, region="us")]
    await placer.refresh()
    assert (await placer.deploy(request("u1"), CTX)).provider == "mid"  # no twin on "cheap"
    placer.release("u1")
    assert (await placer.deploy(request("u1"), CTX)).provider == "cheap"
