"""The invariants can fail: a dip below a PDB floor is excused only for the workload an event
touched and only for one start-up plus slack, a Ready external pod must have a serving ledger
entry, and a deployment billing without its pod is an orphan in every sample it is seen."""

from __future__ import annotations

import pytest

from vkprovider.sim.invariants import invariants
from vkprovider.sim.record import Action, LedgerEntry, Sample, WorkloadSample
from vkprovider.sim.scenario import parse_scenario

T0 = 1_800_000_000.0
# 60 simulated seconds per real second; a provider serves 2 + 1 = 3 simulated min = 3 real s after
# its create; the excuse window is that start-up (the local 1 min is shorter) + 2 x 0.5 s samples +
# the 3 s gate dwell + 1 s = 8 real s
S = parse_scenario(
    {
        "name": "inv",
        "clock": {"day": "1h", "real_seconds": 60},
        "fleet": {"nodes": 1, "gpus_per_node": 8, "ready_after": "1m"},
        "providers": [
            {"name": "cheap", "price_per_hour": 6.0, "capacity": 8, "startup": "2m", "ready_after": "1m"}
        ],
        "workloads": [{"name": "chat", "replicas": 4}, {"name": "embed", "replicas": 2}],
        "runtime": {"sample_seconds": 0.5},
    }
)


def day(
    chat: list[tuple[int, int]],
    embed: list[tuple[int, int]],
    uids: list[list[str]] | None = None,
    pods: list[list[str]] | None = None,
) -> list[Sample]:
    """One sample per real second: (local Ready, external Ready) per workload; ``uids`` of the
    Ready external pods, ``pods`` of every pod on the virtual node (default: the Ready ones)."""
    out = []
    for i, ((cl, ce), (el, ee)) in enumerate(zip(chat, embed, strict=True)):
        ready = uids[i] if uids else [f"c{j}" for j in range(ce)]
        out.append(
            Sample(
                t=T0 + i,
                workloads={
                    "chat": WorkloadSample(
                        desired=4,
                        local=cl,
                        external=ce,
                        ready_local=cl,
                        ready_external=ce,
                        ready_external_uids=ready,
                    ),
                    "embed": WorkloadSample(
                        desired=2, local=el, external=ee, ready_local=el, ready_external=ee
                    ),
                },
                virtual_pod_uids=list(pods[i] if pods else ready),
            )
        )
    return out


def test_an_event_excuses_only_the_workload_it_touched_and_only_for_a_start_up() -> None:
    assert S.excuse_seconds == pytest.approx(8.0)
    # training arrives at 2 s and preempts chat (its pods then exist on the virtual node from 2 s)
    chat = [(4, 0)] * 2 + [(0, 0)] * 3 + [(0, 4)] * 6 + [(2, 0)] * 3 + [(4, 0)] * 2
    embed = [(2, 0)] * 16
    pods: list[list[str]] = [[]] * 2 + [[f"c{j}" for j in range(4)]] * 9 + [[]] * 5
    entries = [LedgerEntry("cheap", f"c{j}", "o", 1, 6.0, T0 + 2.0, T0 + 10.5, f"d{j}") for j in range(4)]
    actions = [Action(T0 + 2.0, "training-start", "train")]
    inv = invariants(S, day(chat, embed, pods=pods), actions, {"cheap": entries}, [])
    chat_inv, embed_inv = inv.workloads
    assert [why for _, _, why in chat_inv.excuses] == ["training train preempted it"]
    assert embed_inv.excuses == []  # it lost nothing
    # below the floor (3) at 2..4 s, inside the window (2..10 s), and again at 11..13 s (2 Ready:
    # the return took two at once), past it: 1 real s = 1 simulated min per sample; Ready outside
    # from 5 s, when the deployments created at 2 s serve
    assert chat_inv.below_floor_minutes == pytest.approx(3 + 3)
    assert chat_inv.below_floor_unexcused_minutes == pytest.approx(3)
    assert chat_inv.ghost_ready_replica_minutes == 0 and inv.orphan_minutes == 0
    assert inv.broken == ["chat below its PDB floor (3) for 3 min outside excuse windows"]
    assert not inv.ok


def test_a_dip_no_event_explains_is_never_excused() -> None:
    chat = [(4, 0)] * 16
    embed = [(2, 0)] * 5 + [(0, 0)] * 2 + [(2, 0)] * 9  # a scale of chat does not excuse embed
    inv = invariants(S, day(chat, embed), [Action(T0 + 4.0, "scale", "chat")], {}, [])
    assert [why for _, _, why in inv.workloads[0].excuses] == ["scaled"]
    assert inv.workloads[1].excuses == []
    assert inv.workloads[1].below_floor_unexcused_minutes == pytest.approx(2)
    assert inv.workloads[1].short_replica_minutes == pytest.approx(2 * 2)


def test_ready_external_pods_without_a_serving_ledger_entry_are_ghosts() -> None:
    chat = [(0, 4)] * 6
    embed = [(2, 0)] * 6
    # c0 serves from 0 s (created at -3 s) until 3.5 s: Ready at 4 and 5 s is a ghost; c1 has no
    # entry at all; c2 serves all along; c3 was Ready at 0..2 s before its deployment could serve
    entries = [
        LedgerEntry("cheap", "c0", "o", 1, 6.0, T0 - 3.0, T0 + 3.5, "d0"),
        LedgerEntry("cheap", "c2", "o", 1, 6.0, T0 - 3.0, None, "d2"),
        LedgerEntry("cheap", "c3", "o", 1, 6.0, T0 + 0.0, None, "d3"),
    ]
    uids = [["c0", "c1", "c2", "c3"]] * 6
    inv = invariants(S, day(chat, embed, uids), [], {"cheap": entries}, [])
    # each sample weighs the second until the next (the last one closes the day): c1 at 0..4 s,
    # c0 at 4 s, c3 at 0, 1 and 2 s
    assert inv.workloads[0].ghost_ready_replica_minutes == pytest.approx(5 + 1 + 3)
    assert "chat: 9 ghost-Ready replica-min" in inv.broken[0]


def test_an_orphan_billing_mid_day_is_counted_though_collected_before_the_end() -> None:
    chat = [(0, 2)] * 6
    embed = [(2, 0)] * 6
    uids = [["c0", "c1"]] * 2 + [["c0"]] * 4  # c1's pod is gone from 2 s; its deployment bills to 4 s
    entries = [
        LedgerEntry("cheap", "c0", "o", 1, 6.0, T0 - 5.0, None, "d0"),
        LedgerEntry("cheap", "c1", "o", 1, 6.0, T0 - 5.0, T0 + 4.0, "d1"),
    ]
    inv = invariants(S, day(chat, embed, uids), [], {"cheap": entries}, orphans=[])
    assert inv.orphans == []  # nothing left after settling ...
    assert inv.orphan_minutes == pytest.approx(2.0)  # ... but 2 real s = 2 simulated min billed without a pod
    assert inv.orphan_money == pytest.approx(6.0 * 2 / 60)
    assert inv.orphans_seen == ["cheap/d1 (pod c1)"]
    assert not inv.ok


def test_a_sample_judges_pods_by_the_window_they_were_listed_in() -> None:
    chat = [(0, 1)] * 4
    embed = [(2, 0)] * 4
    samples = day(chat, embed, [["c0"]] * 4)
    for x in samples:
        x.pods_at = x.t - 0.3  # the pod list went out 0.3 s before the sample's time
    # c0's deployment ended at 0.9 s: listed Ready at 0.7..1 s, it was still serving then; c1's
    # deployment was created at 0.8 s, after the list, for a pod the list could not show yet
    entries = [
        LedgerEntry("cheap", "c0", "o", 1, 6.0, T0 - 5.0, T0 + 0.9, "d0"),
        LedgerEntry("cheap", "c1", "o", 1, 6.0, T0 + 0.8, None, "d1"),
    ]
    inv = invariants(S, samples, [], {"cheap": entries}, [])
    assert inv.workloads[0].ghost_ready_replica_minutes == pytest.approx(1)  # at 2 s c0 is a ghost: 1.7 > 0.9
    assert inv.orphan_minutes == pytest.approx(1)  # from 2 s c1 bills and its pod was never listed


def test_a_rise_of_the_desired_count_excuses_its_start_up_even_without_an_action() -> None:
    samples = day([(4, 0)] * 6, [(2, 0)] * 6)
    for x in samples[2:]:  # an HPA asks for 6 at 2 s; the new replicas are Ready after 2 samples
        x.workloads["chat"].desired = 6
    for x in samples[4:]:
        x.workloads["chat"].ready_local = x.workloads["chat"].local = 6
    inv = invariants(S, samples, [], {}, [])
    assert [why for _, _, why in inv.workloads[0].excuses] == ["desired rose"]
    assert inv.workloads[0].below_floor_minutes == pytest.approx(2)  # floor 5 with 6 desired, 4 Ready
    assert inv.ok


def test_a_preemption_whose_replacements_stay_local_is_excused_for_the_workload_it_touched() -> None:
    """Training preempts embed's local pods; the scheduler puts their replacements on another
    local node, so the local count never drops, only readiness (seen in krea-day at 03:03)."""
    chat = [(4, 0)] * 16
    embed = [(2, 0)] * 16
    samples = day(chat, embed)
    for x in samples[2:4]:
        x.workloads["embed"] = WorkloadSample(desired=2, local=2, ready_local=0)
    actions = [Action(T0 + 2.0, "training-start", "train")]
    inv = invariants(S, samples, actions, {}, [])
    chat_inv, embed_inv = inv.workloads
    assert chat_inv.excuses == []
    assert [why for _, _, why in embed_inv.excuses] == ["training train preempted it"]
    assert embed_inv.below_floor_minutes == pytest.approx(2)
    assert embed_inv.below_floor_unexcused_minutes == 0
    # the same dip with no training start is never excused
    bare = invariants(S, samples, [], {}, [])
    assert bare.workloads[1].below_floor_unexcused_minutes == pytest.approx(2)
