"""Hysteresis of the gate's decision, driven by a fake clock (no sleeping, no timing asserts)."""

from __future__ import annotations

import itertools

from vkprovider.gate.config import GateConfig
from vkprovider.gate.decision import Action, Decider, Observation


def config(**overrides: object) -> GateConfig:
    base: dict[str, object] = {
        "taint_at_free_gpus": 4,
        "untaint_below_free_gpus": 2,
        "dwell_seconds": 30,
        "min_flip_interval_seconds": 60,
        "signal_timeout_seconds": 120,
    }
    return GateConfig.model_validate({**base, **overrides})


class Run:
    """Feed observations one second apart; apply flips like the loop does."""

    def __init__(self, cfg: GateConfig, *, tainted: bool = False) -> None:
        self.decider = Decider(cfg)
        self.decider.tainted = tainted
        self.now = 0.0
        self.flips: list[tuple[float, Action]] = []

    def step(self, free: float | None, **kw: int) -> Action:
        decision = self.decider.decide(Observation(now=self.now, free_gpus=free, error="down", **kw))
        if decision.action is not Action.HOLD:
            self.decider.flipped(decision.action is Action.TAINT, self.now)
            self.flips.append((self.now, decision.action))
        self.now += 1.0
        return decision.action


def test_taints_only_after_the_dwell() -> None:
    run = Run(config())
    actions = [run.step(8) for _ in range(31)]
    assert actions[:30] == [Action.HOLD] * 30
    assert actions[30] is Action.TAINT


def test_a_dip_below_taint_at_restarts_the_dwell() -> None:
    run = Run(config())
    for _ in range(20):
        run.step(8)
    run.step(3)  # inside the band, below taint_at
    actions = [run.step(8) for _ in range(31)]
    assert Action.TAINT not in actions[:30]
    assert actions[30] is Action.TAINT


def test_the_band_holds_and_untaint_waits_for_the_minimum_interval() -> None:
    run = Run(config(), tainted=True)
    run.decider.last_flip_at = 0.0
    run.now = 10.0
    assert run.step(3) is Action.HOLD  # in the band: nothing changes
    assert run.step(1) is Action.HOLD  # below untaint_below, but only 11 s since the last flip
    run.now = 60.0
    assert run.step(1) is Action.UNTAINT


def test_an_oscillating_signal_flips_no_faster_than_band_dwell_and_interval_allow() -> None:
    cfg = config(dwell_seconds=30, min_flip_interval_seconds=60)
    run = Run(cfg)
    # a square wave between 0 and 8 free GPUs with a 20 s period: never 30 s above taint_at
    for free in itertools.islice(itertools.cycle([8] * 10 + [0] * 10), 600):
        run.step(free)
    assert run.flips == []
    # a slower wave (80 s period) can flip, but consecutive flips are >= 60 s apart
    run = Run(cfg)
    for free in itertools.islice(itertools.cycle([8] * 40 + [0] * 40), 1200):
        run.step(free)
    assert run.flips, "a 40 s plateau above taint_at outlasts the 30 s dwell"
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(run.flips)]
    assert all(gap >= 60 for gap in gaps)
    assert [a for _, a in run.flips] == [Action.TAINT, Action.UNTAINT] * (len(run.flips) // 2) + (
        [Action.TAINT] if len(run.flips) % 2 else []
    )


def test_never_taints_while_a_preemption_is_in_progress() -> None:
    run = Run(config(dwell_seconds=0, min_flip_interval_seconds=0))
    assert all(run.step(16, preempting=2) is Action.HOLD for _ in range(100))
    assert run.step(16) is Action.TAINT


def test_pending_burst_pods_untaint_at_once_and_block_re_tainting() -> None:
    run = Run(config(), tainted=True)
    run.decider.last_flip_at = 0.0
    run.now = 1.0  # well inside the minimum interval, and plenty free
    assert run.step(8, pending_unschedulable=1) is Action.UNTAINT
    run.now = 500.0
    assert all(run.step(8, pending_unschedulable=1) is Action.HOLD for _ in range(100))


def test_pending_rule_can_be_switched_off() -> None:
    run = Run(config(untaint_on_pending=False), tainted=True)
    assert run.step(8, pending_unschedulable=3) is Action.HOLD


def test_signal_unavailable_untaints_after_the_timeout_only() -> None:
    run = Run(config(signal_timeout_seconds=120), tainted=True)
    run.decider.last_flip_at = 0.0
    run.now = 1.0
    actions = [run.step(None) for _ in range(121)]
    assert actions[:120] == [Action.HOLD] * 120
    decision_reason = run.decider.decide(Observation(now=run.now, free_gpus=None, error="x"))
    assert actions[120] is Action.UNTAINT
    assert decision_reason.action is Action.HOLD  # already untainted: nothing more to do


def test_a_recovered_signal_resets_the_timeout() -> None:
    run = Run(config(signal_timeout_seconds=10), tainted=True)
    for _ in range(9):
        run.step(None)
    run.step(3)  # in the band: fine, and the outage is over
    assert all(run.step(None) is Action.HOLD for _ in range(10))
    assert run.step(None) is Action.UNTAINT


def test_signal_unavailable_never_taints() -> None:
    run = Run(config(dwell_seconds=0, min_flip_interval_seconds=0))
    assert all(run.step(None) is Action.HOLD for _ in range(500))
