"""The report is a pure function of the recording: money from the ledgers, the ideal and the
counterfactuals from the samples, invariants from both, and a real PNG."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from vkprovider.sim import chart, report
from vkprovider.sim.costs import costs
from vkprovider.sim.invariants import invariants
from vkprovider.sim.record import Action, LedgerEntry, Recording, Sample, TrainingSample, WorkloadSample
from vkprovider.sim.scenario import Scenario, parse_scenario
from vkprovider.sim.timeline import changes, events_csv

T0 = 1_800_000_000.0  # unix seconds of simulated 00:00


def scenario() -> Scenario:
    return parse_scenario(
        {
            "name": "unit",
            "clock": {"day": "10h", "real_seconds": 10},  # 3600 simulated seconds per real second
            "fleet": {"nodes": 1, "gpus_per_node": 4},
            "providers": [
                {"name": "cheap", "price_per_hour": 2.0, "capacity": 2},
                {"name": "dear", "price_per_hour": 5.0, "capacity": 10},
            ],
            "workloads": [{"name": "chat", "replicas": 4, "pdb": {"max_unavailable": 1}}],
            "timeline": [
                {"at": "2h", "training": {"name": "train", "gpus": 4, "duration": "4h"}},
                {"at": "4h", "capacity": {"provider": "cheap", "capacity": 0}},
            ],
            "runtime": {"lost_after_seconds": 1.5},
        }
    )


def sample(t: float, local: int, external: int, ready: int, training_gpus: int = 0) -> Sample:
    chat = WorkloadSample(desired=4, local=local, external=external, ready_local=min(ready, local))
    chat.ready_external = ready - chat.ready_local
    return Sample(
        t=T0 + t,
        workloads={"chat": chat},
        training={"train": TrainingSample(running=1 if training_gpus else 0, gpus=training_gpus)},
        local_gpus=4,
        local_gpus_used=local + training_gpus,
        gate_tainted=not training_gpus,
        external_by_provider={"cheap": min(external, 2), "dear": max(0, external - 2)} if external else {},
    )


def recording() -> Recording:
    s = scenario()
    samples = [sample(t, 4, 0, 4) for t in (0.0, 1.0)]
    samples.append(sample(2.0, 0, 0, 0, training_gpus=4))  # preempted: short, then back within 1.5 s
    samples += [sample(t, 0, 4, 4, training_gpus=4) for t in (3.0, 4.0, 5.0)]
    samples += [sample(t, 4, 0, 4) for t in (6.0, 7.0, 8.0, 9.0, 10.0)]
    ledgers = {
        # two on cheap for 4 real seconds (= 4 simulated hours), two on dear for 4 s
        "cheap": [LedgerEntry("cheap", f"u{i}", "c", 1, 2.0, T0 + 2.0, T0 + 6.0, f"c-{i}") for i in range(2)],
        "dear": [LedgerEntry("dear", f"u{i}", "d", 1, 5.0, T0 + 2.0, T0 + 6.0, f"d-{i}") for i in (2, 3)],
    }
    actions = [
        Action(T0 + 2.0, "training-start", "train", "4 GPUs", 4.0),
        Action(T0 + 4.0, "capacity", "cheap", "at most 0", 0.0),
        Action(T0 + 6.0, "training-end", "train", "done", 4.0),
    ]
    return Recording(
        scenario=s.model_dump(mode="json"),
        day_start=T0,
        day_end=T0 + 10.0,
        end=T0 + 12.0,
        samples=samples,
        actions=actions,
        ledgers=ledgers,
        components={"gate": True, "descheduler": True},
    )


def test_money_comes_from_the_ledgers_scaled_to_the_simulated_day() -> None:
    s, rec = scenario(), recording()
    c = costs(s, rec.ledgers, rec.samples, rec.actions, start=rec.day_start, end=rec.day_end, until=rec.end)
    by_name = {p.provider: p for p in c.providers}
    # 4 real seconds x 2 deployments x 2.0/h = 16/3600 in the ledger; x3600 on the simulated day
    assert by_name["cheap"].ledger_money == pytest.approx(2 * 2.0 * 4 / 3600)
    assert by_name["cheap"].money == pytest.approx(16.0)
    assert by_name["dear"].money == pytest.approx(40.0)
    assert by_name["cheap"].gpu_hours == pytest.approx(8.0)
    assert c.total.money == pytest.approx(56.0) and c.total.deployments == 4


def test_open_ledger_entries_bill_until_the_end_of_the_recording() -> None:
    s, rec = scenario(), recording()
    rec.ledgers["dear"][0].ended_at = None
    c = costs(s, rec.ledgers, rec.samples, rec.actions, start=rec.day_start, end=rec.day_end, until=rec.end)
    assert {p.provider: p for p in c.providers}["dear"].money == pytest.approx(5.0 * 4 + 5.0 * 10)


def test_the_ideal_and_the_counterfactuals_of_the_day() -> None:
    s, rec = scenario(), recording()
    c = costs(s, rec.ledgers, rec.samples, rec.actions, start=rec.day_start, end=rec.day_end, until=rec.end)
    ideal, nothing, never, noexec = c.policies
    # training holds the node 2h..6h: 4 replicas out, cheap 2 + dear 2; the capacity cut at 4h
    # stops new cheap instances but the two running keep their price: exactly this run's ledgers
    assert ideal.money == pytest.approx(4 * (2 * 2.0 + 2 * 5.0)) == pytest.approx(c.total.money)
    assert ideal.gpu_hours == pytest.approx(16.0) and ideal.unserved_replica_hours == 0
    assert nothing.money == 0 and nothing.unserved_replica_hours == pytest.approx(16.0)
    # never return: what went out at 2h bills until the end of the day (10h)
    assert never.money == pytest.approx(8 * (2 * 2.0 + 2 * 5.0))
    # NoExecute: the ideal's money, but all 4 come home at once and restart (5 min each)
    assert noexec.money == pytest.approx(ideal.money)
    assert noexec.min_ready == {"chat": 0}
    assert noexec.not_ready_replica_hours == pytest.approx(4 * 5 / 60)
    assert [t for t, _ in ideal.cumulative] == [x.t for x in rec.samples]
    assert ideal.cumulative[-1][1] == pytest.approx(ideal.money)


def test_invariants_hold_for_a_clean_run() -> None:
    s, rec = scenario(), recording()
    inv = invariants(s, rec.samples, rec.actions, rec.ledgers, [])
    (chat,) = inv.workloads
    assert chat.min_ready == 0 and chat.floor == 3
    assert chat.below_floor_minutes == pytest.approx(60.0)  # the preemption sample, simulated
    assert chat.below_floor_unexcused_minutes == 0  # the training start preempted it: excused
    assert [why for _, _, why in chat.excuses] == ["training train preempted it"]
    assert chat.short_replica_minutes == pytest.approx(4 * 60.0)
    assert inv.lost == 0 and inv.ok and inv.broken == []


def test_a_replica_missing_longer_than_the_grace_is_lost() -> None:
    s, rec = scenario(), recording()
    for x in rec.samples[6:]:
        x.workloads["chat"].ready_local = 3  # one replica never comes back
    inv = invariants(s, rec.samples, rec.actions, rec.ledgers, [])
    assert inv.lost == 1 and not inv.ok and inv.broken == ["1 pods lost"]
    assert inv.workloads[0].below_floor_unexcused_minutes == 0  # 3 Ready is the floor


def test_twin_deployments_are_duplicates_and_orphans_are_reported() -> None:
    s, rec = scenario(), recording()
    twin = LedgerEntry("dear", "u0", "d", 1, 5.0, T0 + 3.0, T0 + 5.0, "d-twin")
    rec.ledgers["dear"].append(twin)
    later = LedgerEntry("dear", "u1", "d", 1, 5.0, T0 + 7.0, T0 + 8.0, "d-later")
    rec.ledgers["dear"].append(later)
    inv = invariants(s, rec.samples, rec.actions, rec.ledgers, ["dear/d-9 (pod x)"])
    assert inv.duplicates == ["u0: cheap/c-0 + dear/d-twin"]
    assert inv.redeployed == ["u1"]
    assert inv.orphans == ["dear/d-9 (pod x)"] and not inv.ok


def test_events_list_every_change_in_time_order() -> None:
    s, rec = scenario(), recording()
    rows = list(
        csv.DictReader(
            io.StringIO(events_csv(s, rec.day_start, changes(rec.samples, rec.actions, rec.ledgers)))
        )
    )
    kinds = [r["kind"] for r in rows]
    assert kinds.count("billing-start") == 4 and kinds.count("billing-end") == 4
    assert "gate" in kinds and "training-start" in kinds and "capacity" in kinds
    assert [float(r["real_seconds"]) for r in rows] == sorted(float(r["real_seconds"]) for r in rows)
    gate = next(r for r in rows if r["kind"] == "gate")
    assert gate["sim_clock"] == "02:00" and "bursting allowed" in gate["detail"]


def test_the_chart_series_come_from_the_samples_and_the_ledgers() -> None:
    s, rec = scenario(), recording()
    rec.samples[3].workloads["chat"].external = 5  # a fifth pod bound, its deployment not created yet
    data = chart.series(s, rec)
    assert data.hours == [float(i) for i in range(11)]
    assert data.local == [4, 4, 0, 0, 0, 0, 4, 4, 4, 4, 4]
    # per provider: the deployments its ledger billed (from 2h to 6h)
    assert data.external == {
        "cheap": [0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 0],
        "dear": [0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 0],
    }
    assert data.placing == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert data.ready == [4, 4, 0, 4, 4, 4, 4, 4, 4, 4, 4] and data.floor == [3] * 11
    assert data.spent[-1] == pytest.approx(56.0) and data.spent[4] == pytest.approx(2 * 14.0)
    assert data.ideal_spent[-1] == pytest.approx(56.0)
    rec.actions += [Action(T0 + 7.0, "cordon", "local-gpu-0"), Action(T0 + 9.0, "uncordon", "local-gpu-0")]
    rec.actions += [Action(T0 + 8.0, "outage-start", "dear")]
    assert sorted(chart.series(s, rec).windows) == [
        ("maintenance", "local-gpu-0", 7.0, 9.0),
        ("outage", "dear", 8.0, 10.0),
    ]


def colour_pixels(png: Path, colour: str) -> int:
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    with Image.open(png) as image:
        counts = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(n for n, pixel in counts if pixel == rgb)


def test_the_chart_draws_the_data_and_refuses_an_empty_day(tmp_path: Path) -> None:
    s, rec = scenario(), recording()
    chart.draw(s, rec, tmp_path / "t.png")
    # the stacked areas are solid: local replicas and both providers fill a visible area
    assert colour_pixels(tmp_path / "t.png", chart.LOCAL_COLOUR) > 5000
    assert colour_pixels(tmp_path / "t.png", chart.PROVIDER_COLOURS[0]) > 1000
    assert colour_pixels(tmp_path / "t.png", chart.PROVIDER_COLOURS[1]) > 1000
    rec.samples = []
    with pytest.raises(chart.EmptyRecording):
        chart.draw(s, rec, tmp_path / "empty.png")


def test_write_produces_every_file_and_a_real_png(tmp_path: Path) -> None:
    rec = recording()
    folder = report.write(rec, tmp_path / "r")
    md = (folder / "report.md").read_text()
    assert md.splitlines()[2].startswith("**Verdict: every invariant held**")
    assert "| **total** | 4 | 16.0 | $56.00 |" in md
    assert "| ideal (lower bound) | 16.0 | $56.00 | 0.0 | — | equal |" in md
    assert "- pods lost: **0**" in md and "orphaned deployments at the end: **0**" in md
    assert "| sampling (runtime.sample_seconds) | 1 | 60.0 |" in md  # x3600: a real second is an hour
    summary = json.loads((folder / "report.json").read_text())
    assert summary["total"]["money"] == pytest.approx(56.0)
    assert summary["verdict"] == {"ok": True, "broken": []}
    assert summary["policies"][0]["money"] == pytest.approx(56.0)
    assert (folder / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert colour_pixels(folder / "timeline.png", chart.LOCAL_COLOUR) > 5000
    again = Recording.load(folder / "recording.json")
    assert report.markdown(again) == md


def test_a_broken_invariant_leads_the_report(tmp_path: Path) -> None:
    rec = recording()
    rec.orphans = ["dear/d-9 (pod x)"]
    md = (report.write(rec, tmp_path / "r") / "report.md").read_text()
    assert (
        md.splitlines()[2]
        == "**Verdict: BROKEN** — 1 orphaned deployments after settling. `make demo` exits 3. "
        "Traffic was not measured (no data path, see the notes)."
    )


def test_an_empty_day_writes_a_report_but_no_chart(tmp_path: Path) -> None:
    rec = recording()
    rec.samples = []
    folder = report.write(rec, tmp_path / "r")
    assert "no samples during the day" in (folder / "report.md").read_text()
    assert not (folder / "timeline.png").exists()
