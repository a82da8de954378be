"""Blocklist, health/breaker, budgets, spread: the state placement keeps between decisions."""

from __future__ import annotations

from placement_support import Clock

from vkprovider.placement.blocklist import Blocklist, block_key
from vkprovider.placement.budget import Budgets
from vkprovider.placement.health import ProviderHealth
from vkprovider.placement.spread import Spread, spread_limit


def test_blocklist_expires_after_ttl() -> None:
    clock = Clock()
    bl = Blocklist(60, clock=clock)
    bl.add("a", "h100-sxm", "us", "full")
    key = block_key("a", "H100-SXM", "us")
    assert bl.is_blocked(key)
    assert not bl.is_blocked(block_key("a", "H100-SXM", "eu"))  # scoped to the triple
    clock.advance(59.9)
    assert bl.is_blocked(key) and len(bl) == 1
    clock.advance(0.2)
    assert not bl.is_blocked(key) and len(bl) == 0


def test_blocklist_custom_ttl_and_operator_remove() -> None:
    clock = Clock()
    bl = Blocklist(60, clock=clock)
    bl.add("a", "x", "r1", "full", ttl=5)
    bl.add("a", "y", "r1", "full")
    bl.add("b", "x", "r1", "full")
    clock.advance(6)
    assert [(e.provider, e.gpu_type) for e in bl.entries()] == [("a", "Y"), ("b", "X")]
    assert bl.remove("a") == 1
    assert [e.provider for e in bl.entries()] == ["b"]


def test_health_unreachable_then_recovered() -> None:
    clock = Clock()
    h = ProviderHealth(["a"], clock=clock)
    assert h.unusable_reason("a") is None and h.summary()["a"]["reachable"]
    h.record_probe("a", False, "connection refused")
    assert h.unusable_reason("a") is None  # one failed call among successes: a flaky API
    h.record_probe("a", False, "connection refused")
    assert not h.summary()["a"]["reachable"]
    assert h.unusable_reason("a") == ("unhealthy", "provider unreachable: connection refused")
    h.record_probe("a", True)
    assert h.unusable_reason("a") is None and h.summary()["a"]["reachable"]


def test_breaker_opens_only_when_every_provider_fails_for_the_period() -> None:
    clock = Clock()
    h = ProviderHealth(["a", "b"], breaker_seconds=120, clock=clock)
    assert not h.breaker_open()
    h.record_probe("a", False)
    clock.advance(200)
    assert not h.breaker_open()  # b is fine
    h.record_probe("b", False)
    clock.advance(119)
    assert not h.breaker_open()  # b not failing long enough yet
    h.record_probe("a", False)  # repeated failures keep the original start
    clock.advance(2)
    assert h.breaker_open()
    h.record_probe("b", True)
    assert not h.breaker_open()  # one recovered provider closes it


def test_breaker_counts_disabled_providers_as_failing() -> None:
    clock = Clock()
    h = ProviderHealth(["a"], breaker_seconds=10, clock=clock)
    h.disable("a", "card declined")
    clock.advance(11)
    assert h.breaker_open()


def test_no_providers_no_breaker() -> None:
    assert not ProviderHealth().breaker_open()


def test_quota_disable_until_operator_or_late_probe() -> None:
    clock = Clock()
    h = ProviderHealth(["a"], quota_reenable_seconds=300, clock=clock)
    h.disable("a", "over quota")
    assert h.unusable_reason("a") == ("disabled", "provider disabled: over quota")
    h.record_probe("a", True)  # an immediate probe success says nothing about the bill
    assert h.disabled("a")
    h.enable("a")
    assert not h.disabled("a")
    h.disable("a", "over quota")
    clock.advance(301)
    h.record_probe("a", True)
    assert not h.disabled("a")


def test_failure_rate_window() -> None:
    clock = Clock()
    h = ProviderHealth(["a"], failure_window_seconds=100, clock=clock)
    h.record_call("a", True)
    h.record_call("a", False)
    h.record_preemption("a")
    assert abs(h.failure_rate("a") - 2 / 3) < 1e-9
    clock.advance(101)
    assert h.failure_rate("a") == 0.0
    assert h.failure_rate("unknown") == 0.0


def test_budget_caps_and_release() -> None:
    b = Budgets({"team": 10.0}, default_cap=None)
    assert b.remaining("other") == float("inf")
    b.commit("p1", "team", 6.0)
    assert b.remaining("team") == 4.0
    assert b.remaining("team", uid="p1") == 10.0  # its own share is free when re-placing
    b.commit("p1", "team", 7.0)  # re-placement replaces, never doubles
    assert b.spent("team") == 7.0
    b.commit("p2", "team", 3.0)
    assert b.remaining("team") == 0.0
    b.release("p1")
    b.release("p1")  # idempotent
    assert b.spent("team") == 3.0
    b.release("p2")
    assert b.spent("team") == 0.0


def test_budget_default_cap() -> None:
    b = Budgets({}, default_cap=2.0)
    assert b.cap("anything") == 2.0


def test_spread_limit() -> None:
    assert spread_limit(0.5, 1) == 1
    assert spread_limit(0.5, 2) == 1
    assert spread_limit(0.5, 3) == 2
    assert spread_limit(0.34, 3) == 2
    assert spread_limit(1.0, 7) == 7


def test_spread_allows_share_and_counts_release() -> None:
    s = Spread()
    assert s.allowed("w", "a", 0.5, "u1")
    s.add("u1", "w", "a")
    assert not s.allowed("w", "a", 0.5, "u2")  # 2 of 2 would be on a
    assert s.allowed("w", "b", 0.5, "u2")
    assert s.allowed("w", "a", 0.5, "u1")  # re-placing u1 itself does not count twice
    assert s.allowed("w", "a", None, "u2")  # no cap
    assert s.allowed(None, "a", 0.5, "u2")  # no workload
    s.add("u2", "w", "b")
    assert s.allowed("w", "a", 0.5, "u3")  # 2 of 3 on a: ceil(1.5) = 2
    s.release("u1")
    s.release("u2")
    assert s.held("u1") is None and s.held("u2") is None
    s.add("u3", "w", "a")
    assert not s.allowed("w", "a", 0.5, "u4") and s.allowed("w", "b", 0.5, "u4")  # only u3 counts


def test_health_tells_subscribers_when_reachability_flips_and_only_then() -> None:
    from vkprovider.placement.health import ProviderHealth

    health = ProviderHealth(["a"])
    seen: list[tuple[str, bool]] = []
    unsubscribe = health.subscribe(lambda name, ok: seen.append((name, ok)))
    health.record_probe("a", True)
    health.record_probe("a", False, "down")
    health.record_probe("a", False, "still down")
    health.record_probe("a", True)
    unsubscribe()
    health.record_probe("a", False, "down again")
    assert seen == [("a", False), ("a", True)]
