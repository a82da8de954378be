"""The gate's claim on the virtual node (one owner, operator pause, heartbeat cadence) and the
loop's obedience to it, over a fake Node API with the real resourceVersion precondition."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.unit.gate.gate_fakes import FakeNodeApi, virtual_node
from tests.unit.gate.test_gate_loop import EPOCH, Signal, View, gate
from vkprovider.gate import metrics
from vkprovider.gate.claim import Claim, Standing
from vkprovider.gate.decision import Action
from vkprovider.kube.gate_heartbeat import (
    DEFAULT_TAINT_KEY,
    HEARTBEAT_ANNOTATION,
    PAUSED_ANNOTATION,
    Heartbeat,
    read_heartbeat,
)

TAINT = {"key": "local-capacity", "value": "available", "effect": "NoSchedule"}


def beat(owner: str, renewed: float, last_flip: float | None = None, timeout: float = 60) -> str:
    return Heartbeat(owner, EPOCH + renewed, timeout, "local-capacity", last_flip).to_annotation()


def annotated(notes: dict[str, str], taints: list[Any] | None = None) -> dict[str, Any]:
    vk = virtual_node(taints=taints)
    vk["metadata"]["annotations"] = notes
    return vk


def claim(vk: dict[str, Any], identity: str = "gate-b", now: list[float] | None = None) -> Claim:
    clock = now if now is not None else [0.0]
    return Claim(
        FakeNodeApi([vk]),  # type: ignore[arg-type]
        "vk",
        identity=identity,
        taint_key="local-capacity",
        signal_timeout_seconds=120,
        wall=lambda: EPOCH + clock[0],
    )


def test_the_heartbeat_round_trips_and_a_malformed_one_names_the_annotation() -> None:
    hb = Heartbeat("lease:ns/x", EPOCH + 1.5, 60.0, "local-capacity", EPOCH - 30)
    assert read_heartbeat(annotated({HEARTBEAT_ANNOTATION: hb.to_annotation()})) == hb
    with pytest.raises(ValueError, match=HEARTBEAT_ANNOTATION):
        read_heartbeat(annotated({HEARTBEAT_ANNOTATION: '{"owner": "x"}'}))
    assert DEFAULT_TAINT_KEY == "local-capacity"  # the config's default key (gate.config)


@pytest.mark.parametrize(
    ("notes", "standing"),
    [
        ({}, Standing.OWNER),
        ({HEARTBEAT_ANNOTATION: beat("gate-b", -50)}, Standing.OWNER),  # our own
        ({HEARTBEAT_ANNOTATION: beat("gate-a", -50)}, Standing.FOREIGN),  # fresh, another's
        ({HEARTBEAT_ANNOTATION: beat("gate-a", -61)}, Standing.OWNER),  # stale: take over
        ({HEARTBEAT_ANNOTATION: "not json"}, Standing.OWNER),  # malformed counts as absent
        ({PAUSED_ANNOTATION: "oncall: draining"}, Standing.PAUSED),
        ({PAUSED_ANNOTATION: ""}, Standing.OWNER),  # empty is not a pause
    ],
)
def test_standing(notes: dict[str, str], standing: Standing) -> None:
    vk = annotated(notes)
    assert claim(vk).judge(vk).standing is standing


async def test_renewals_come_at_most_every_quarter_timeout_and_after_a_flip() -> None:
    now = [0.0]
    vk = annotated({})
    c = claim(vk, now=now)
    api: FakeNodeApi = c._kube  # type: ignore[assignment]
    writes = 0
    for second in range(0, 121):  # a tick a second for two minutes
        now[0] = float(second)
        writes += await c.renew(api.nodes["vk"])
    assert writes == 5  # at 0, 30, 60, 90, 120: never a write storm
    c.flipped()
    assert await c.renew(api.nodes["vk"], force=True)
    written = read_heartbeat(api.nodes["vk"])
    assert (
        written is not None and written.last_flip == EPOCH + 120 and written.timeout_seconds == 90
    )  # 3/4 of signal_timeout


async def test_a_takeover_re_judges_on_the_fresh_node() -> None:
    """Our view says the other gate is stale; the API says it renewed meanwhile: no write."""
    vk = annotated({HEARTBEAT_ANNOTATION: beat("gate-a", -100)})
    c = claim(vk)
    api: FakeNodeApi = c._kube  # type: ignore[assignment]
    seen = annotated({HEARTBEAT_ANNOTATION: beat("gate-a", -100)})
    api.nodes["vk"]["metadata"]["annotations"][HEARTBEAT_ANNOTATION] = beat("gate-a", -1)
    assert not await c.renew(seen)
    assert api.patches == []


async def test_a_second_gate_refuses_says_so_once_and_takes_over_when_stale() -> None:
    vk = annotated({HEARTBEAT_ANNOTATION: beat("gate-b", 0)})
    g, writer, events, clock = gate(View([vk], []), signal_timeout_seconds=120)
    metrics.STATE.start("vk")
    try:
        for second in range(0, 60, 5):
            clock[0] = float(second)
            decision = await g.tick(Signal(8))  # type: ignore[arg-type]
            assert decision.action is Action.HOLD and decision.reason == "GateOwnerConflict"
        assert writer.calls == []
        assert [e[:2] for e in events.recorded] == [("Warning", "GateOwnerConflict")]
        assert "'gate-b' owns the taint" in events.recorded[0][2]
        assert REGISTRY.get_sample_value("vkprovider_gate_owner_conflict", {"node": "vk"}) == 1
        clock[0] = 61.0  # gate-b's heartbeat (timeout 60 s) went stale
        assert (await g.tick(Signal(8))).action is Action.TAINT  # type: ignore[arg-type]
        assert writer.calls == [True]
        assert read_heartbeat(vk) is not None and read_heartbeat(vk).owner == "gate-a"  # type: ignore[union-attr]
        assert events.recorded[1][1] == "GateResumed"
        assert REGISTRY.get_sample_value("vkprovider_gate_owner_conflict", {"node": "vk"}) == 0
    finally:
        metrics.STATE.stop("vk")


async def test_paused_writes_nothing_and_a_manual_untaint_is_not_undone() -> None:
    vk = annotated({PAUSED_ANNOTATION: "true"})
    g, writer, events, clock = gate(View([vk], []))
    g.decider.tainted = True  # the gate had tainted; the operator removed it and paused
    for second in range(5):
        clock[0] = float(second)
        assert (await g.tick(Signal(8))).reason == "GatePaused"  # type: ignore[arg-type]
    assert writer.calls == [] and [e[1] for e in events.recorded] == ["GatePaused"]
    del vk["metadata"]["annotations"][PAUSED_ANNOTATION]
    clock[0] = 10.0
    await g.tick(Signal(8))  # type: ignore[arg-type]
    # resumes from the node's real state (untainted), then decides afresh
    assert [e[1] for e in events.recorded] == ["GatePaused", "GateResumed", "LocalCapacityAvailable"]
    assert writer.calls == [True]


async def test_min_flip_interval_survives_a_new_term() -> None:
    """The last flip is read back from the heartbeat: a new gate waits out the interval."""
    vk = annotated({HEARTBEAT_ANNOTATION: beat("gate-a", -2, last_flip=EPOCH - 2)}, taints=[TAINT])
    g, writer, _, clock = gate(View([vk], []), min_flip_interval_seconds=30)
    assert (await g.tick(Signal(0))).action is Action.HOLD  # type: ignore[arg-type]
    clock[0] = 27.0
    assert (await g.tick(Signal(0))).action is Action.HOLD  # type: ignore[arg-type]
    clock[0] = 28.5
    assert (await g.tick(Signal(0))).action is Action.UNTAINT  # type: ignore[arg-type]
    assert writer.calls == [False]


async def test_a_gate_whose_caches_never_sync_fails_open() -> None:
    """No informer sync: the node comes from a GET, the reading is unavailable even where the
    signal itself answers (the Pending rule needs every pod), and after signal_timeout the taint
    goes (instead of a term stuck before its first decision)."""
    vk = virtual_node(taints=[TAINT])
    view = View([vk], [], synced=False)
    view.nodes_synced = False
    g, writer, events, clock = gate(view, signal_timeout_seconds=30)
    g.view.node = lambda name: None  # type: ignore[method-assign,union-attr]  # the cache is empty
    signal = Signal(8)  # e.g. Prometheus answers
    assert (await g.tick(signal)).action is Action.HOLD  # type: ignore[arg-type]
    clock[0] = 31.0
    assert (await g.tick(signal)).action is Action.UNTAINT  # type: ignore[arg-type]
    assert writer.calls == [False] and events.recorded[-1][1] == "SignalUnavailable"
    assert "not_synced" in events.recorded[-1][2]
