"""Placer.observe: start-up times, preemptions and losses fed back into the score."""

from __future__ import annotations

from typing import Any

import pytest
from placement_support import Clock, MemProvider, offer, placer_for, request

from vkprovider.models import DeploymentStatus, Phase
from vkprovider.placement import PlacementConfig, PodContext
from vkprovider.pods.tracker import DeploymentTracker

CTX = PodContext("ns")


def status(uid: str, phase: Phase, reason: str = "") -> DeploymentStatus:
    return DeploymentStatus(uid=uid, phase=phase, node_name="vk-external", offer_id="c1", reason=reason)


async def two(clock: Clock, **cfg: Any) -> tuple[Any, MemProvider, MemProvider]:
    cheap = MemProvider("cheap", [offer("cheap", "c1", 1.0)])
    mid = MemProvider("mid", [offer("mid", "m1", 1.2)])
    return await placer_for(cheap, mid, clock=clock, config=PlacementConfig(**cfg)), cheap, mid


async def test_first_running_after_deploy_is_the_providers_startup_time() -> None:
    clock = Clock()
    placer, _, _ = await two(clock, startup_cost_per_minute=0.1)
    before = placer.rank(request("x"), CTX).candidates[0].startup_penalty
    await placer.deploy(request("u1"), CTX)
    clock.advance(30)
    placer.observe("u1", "cheap", status("u1", Phase.PENDING))
    clock.advance(12)
    placer.observe("u1", "cheap", status("u1", Phase.RUNNING))
    assert placer.health.startup_seconds("cheap") == pytest.approx(42.0)
    clock.advance(100)  # later Running reports (polls, pushes) are not a second start-up
    placer.observe("u1", "cheap", status("u1", Phase.RUNNING))
    assert placer.health.startup_seconds("cheap") == pytest.approx(42.0)
    after = placer.rank(request("x"), CTX).candidates[0]
    assert after.provider == "cheap" and after.startup_penalty < before  # 42 s < the 60 s default


async def test_slow_startups_move_new_pods_to_a_faster_provider() -> None:
    clock = Clock()
    placer, _, _ = await two(clock, startup_cost_per_minute=0.1)
    for i in range(3):
        await placer.deploy(request(f"u{i}"), CTX)
        clock.advance(600)
        placer.observe(f"u{i}", "cheap", status(f"u{i}", Phase.RUNNING))
    assert placer.rank(request("next"), CTX).candidates[0].provider == "mid"


async def test_provider_preemptions_and_losses_count_as_failures_once() -> None:
    clock = Clock()
    placer, _, _ = await two(clock)
    for uid in ("u1", "u2", "u3"):
        await placer.deploy(request(uid), CTX)
    rate = placer.health.failure_rate
    assert rate("cheap") == 0.0  # three successful deploys
    placer.observe("u1", "cheap", status("u1", Phase.FAILED, "SpotInterrupted"))
    placer.observe("u1", "cheap", status("u1", Phase.FAILED, "SpotInterrupted"))  # same transition
    assert rate("cheap") == pytest.approx(1 / 4)
    placer.observe("u2", "cheap", status("u2", Phase.UNKNOWN, "DeploymentLost"))
    assert rate("cheap") == pytest.approx(2 / 5)
    placer.observe("u3", "cheap", status("u3", Phase.FAILED, "Error"))  # the container exited
    assert rate("cheap") == pytest.approx(2 / 5)


async def test_only_followed_uids_on_their_own_provider_are_observed() -> None:
    clock = Clock()
    placer, _, _ = await two(clock)
    await placer.deploy(request("u1"), CTX)
    placer.observe("u1", "mid", status("u1", Phase.FAILED, "Preempted"))  # a stray elsewhere
    placer.observe("ghost", "cheap", status("ghost", Phase.FAILED, "Preempted"))
    assert placer.health.failure_rate("mid") == 0.0 and placer.health.failure_rate("cheap") == 0.0
    placer.release("u1")
    placer.observe("u1", "cheap", status("u1", Phase.FAILED, "Preempted"))
    assert placer.health.failure_rate("cheap") == 0.0 and len(placer._observer) == 0


async def test_adopted_pods_report_preemptions_but_no_startup() -> None:
    clock = Clock()
    placer, _, _ = await two(clock)
    placer.adopt("old", CTX, "cheap", offer_id="c1")
    clock.advance(500)
    placer.observe("old", "cheap", status("old", Phase.RUNNING))
    assert placer.health.startup_seconds("cheap") is None
    placer.observe("old", "cheap", status("old", Phase.FAILED, "Preempted"))
    assert placer.health.failure_rate("cheap") == 1.0


async def test_the_tracker_feeds_every_recorded_status_to_the_placer() -> None:
    clock = Clock()
    placer, cheap, mid = await two(clock)
    tracker = DeploymentTracker(
        {"cheap": cheap, "mid": mid},
        "vk-external",
        interval=1.0,
        on_change=lambda uid: None,
        clock=clock,
        on_status=placer.observe,
    )
    placed = await placer.deploy(request("u1"), CTX)
    tracker.record("u1", placed.provider, placed.status)
    clock.advance(20)
    cheap.deployments["u1"] = status("u1", Phase.RUNNING)  # the provider starts it
    await tracker.poll_once()
    assert placer.health.startup_seconds("cheap") == pytest.approx(20.0)
