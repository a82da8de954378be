"""The report of one run: ``report.md``, ``events.csv``, ``timeline.png`` and ``report.json``.

A pure function of the recording (samples, actions, ledgers): ``python -m vkprovider.sim.report
DIR`` rebuilds everything from ``DIR/recording.json``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vkprovider.sim import chart
from vkprovider.sim.costs import Costs, costs, ledger_money_between, service_money
from vkprovider.sim.invariants import Invariants, invariants
from vkprovider.sim.record import Admission, Recording
from vkprovider.sim.scenario import Scenario, parse_scenario
from vkprovider.sim.timeline import changes, events_csv, sim_clock


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _hours(seconds: float) -> str:
    hours, minutes = int(seconds // 3600), int(seconds % 3600 // 60)
    return f"{hours:02d}:{minutes:02d}"


def _event_text(s: Scenario, kind: str, body: Any) -> str:
    if kind == "training":
        return (
            f"training **{body.name}**: {body.gpus} GPUs ({body.gpus // s.gpus_per_pod(body)} pods), "
            f"{body.duration / 3600:g}h, priority {body.priority}"
        )
    if kind == "capacity":
        return f"provider **{body.provider}** capacity → {body.capacity} instances"
    if kind == "outage":
        until = f"{body.duration / 3600:g}h" if body.duration else "the rest of the day"
        return f"provider **{body.provider}** API outage for {until}"
    if kind == "maintenance":
        until = f"{body.duration / 3600:g}h" if body.duration else "the rest of the day"
        return f"node {body.node} cordoned for maintenance for {until}"
    return f"workload **{body.workload}** scaled to {body.replicas} replicas"


def _service_line(rec: Recording, s: Scenario) -> str:
    """vkprovider's own spend account against the ledgers, over the sampled day."""
    own = service_money(s, rec.samples, rec.day_start, rec.day_end)
    if own is None:
        return "vkprovider's own spend account was not readable (admin /state budgets)."
    if not rec.samples:
        return ""
    first, last = rec.samples[0].t, rec.samples[-1].t
    billed = ledger_money_between(s, rec.ledgers, max(first, rec.day_start), min(last, rec.day_end))
    apart = (
        f" ({abs(own - billed) / billed:.1%} apart; samples every {s.runtime.sample_seconds:g}s)"
        if billed
        else ""
    )
    return (
        f"vkprovider's own account (admin /state budgets, integrated over the samples): ${own:,.2f}; "
        f"the ledgers billed ${billed:,.2f} over the same window{apart}."
    )


def compute(rec: Recording) -> tuple[Scenario, Costs, Invariants]:
    s = parse_scenario(rec.scenario, "recording")
    c = costs(s, rec.ledgers, rec.samples, rec.actions, start=rec.day_start, end=rec.day_end, until=rec.end)
    inv = invariants(s, rec.samples, rec.actions, rec.ledgers, rec.orphans, rec.admissions)
    return s, c, inv


def markdown(rec: Recording) -> str:
    s, c, inv = compute(rec)
    total = c.total
    lines = [f"# Simulation report: {s.name}", "", s.description.strip(), ""]
    gpus = s.fleet.nodes * s.fleet.gpus_per_node
    lines += [
        f"- Day: {s.clock.day / 3600:g} h simulated in {s.clock.real_seconds:g} s of wall time "
        f"(x{s.scale:g}), from {_stamp(rec.day_start)}; recording ended {_stamp(rec.end)}.",
        f"- Local fleet: {s.fleet.nodes} kwok nodes x {s.fleet.gpus_per_node} {s.fleet.gpu_type} = {gpus} GPUs.",
        "- Providers: "
        + "; ".join(
            f"{p.name} ({p.price_per_hour:.2f}/h per {p.gpus} GPU, {p.capacity} instances)"
            for p in s.providers
        )
        + ".",
        "- Workloads: " + "; ".join(f"{w.name} ({w.replicas} x {w.gpus} GPU)" for w in s.workloads) + ".",
    ]
    for component in ("gate", "descheduler"):
        running = rec.components.get(component, False)
        lines.append(f"- {component}: {'running' if running else '**not running**'}")
    if rec.components.get("kueue", False):
        lines.append(
            "- Kueue: running; training Jobs go through LocalQueue research → ClusterQueue training "
            "(deploy/kueue), admitted whole; the quota sync runs inside vkprovider serve (leader-elected)"
        )
    if not rec.components.get("descheduler", False):
        lines.append("  (without the descheduler nothing brings external replicas home: expect extra spend)")
    lines += [f"- {note}" for note in rec.notes]
    failed = [a for a in rec.actions if a.kind == "error"]
    lines += [f"- **timeline step failed**: {a.subject}: {a.detail}" for a in failed]
    lines += ["", "## Timeline", "", "| at | event |", "|---|---|"]
    lines += [f"| {_hours(e.at)} | {_event_text(s, e.kind, e.body)} |" for e in s.events()]
    lines += [
        "",
        f"## Cost per provider (from the ledgers: {rec.ledger_source})",
        "",
        "Money and GPU-hours are for the simulated day: the ledgers' real-time figures x the time scale.",
        "",
        "| provider | deployments | GPU-hours | cost |",
        "|---|---:|---:|---:|",
    ]
    for p in [*c.providers, total]:
        name = f"**{p.provider}**" if p is total else p.provider
        lines.append(f"| {name} | {p.deployments} | {p.gpu_hours:.1f} | ${p.money:,.2f} |")
    lines += [
        "",
        f"Ledger sum over the real run: ${total.ledger_money:.4f} (x{s.scale:g} = ${total.money:,.2f}).",
        "",
        _service_line(rec, s),
        "",
        "## Against two baselines from the same run",
        "",
        "| | external GPU-hours | cost | this run against it |",
        "|---|---:|---:|---:|",
        f"| this run | {total.gpu_hours:.1f} | ${total.money:,.2f} | |",
    ]
    for b in c.baselines:
        saved = b.money - total.money
        share = f" ({abs(saved) / b.money:.0%})" if b.money else ""
        verdict = f"${abs(saved):,.2f}{share} {'less' if saved >= 0 else 'more'}"
        overflow = f" (incl. {b.overflow_gpu_hours:.1f} beyond capacity)" if b.overflow_gpu_hours else ""
        lines.append(f"| {b.name} | {b.gpu_hours:.1f}{overflow} | ${b.money:,.2f} | {verdict} |")
    lines += [
        "",
        "## Invariants",
        "",
        "| workload | PDB floor | min Ready | below floor (all day) | below floor outside preemption/scale-up | lost |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for w in inv.workloads:
        lines.append(
            f"| {w.workload} | {w.floor} | {w.min_ready} | {w.below_floor_seconds / 60:.0f} min | "
            f"{w.below_floor_unexcused_seconds / 60:.0f} min | {w.lost} |"
        )
    lines += [
        "",
        f"- pods lost: **{inv.lost}** (replicas still missing {s.lost_after:.0f} s = "
        f"{s.sim(s.lost_after) / 60:.0f} simulated min after a workload fell short)",
        f"- orphaned deployments at the end: **{len(inv.orphans)}**"
        + (f" ({', '.join(inv.orphans)})" if inv.orphans else ""),
        f"- duplicate deployments (one pod UID billed twice at once): **{len(inv.duplicates)}**"
        + (f" ({'; '.join(inv.duplicates)})" if inv.duplicates else ""),
        f"- pod UIDs deployed again after an earlier deployment ended: {len(inv.redeployed)}",
    ]
    if s.training.kueue:
        lines.append(
            "- gang admission (no training pod before its Job was admitted, none while queued): "
            f"**{len(inv.gang)}** violations" + (f" ({'; '.join(inv.gang)})" if inv.gang else "")
        )
        lines += admission_section(s, rec)
    lines += [
        "",
        "Files: `timeline.png`, `events.csv` (every state change), `recording.json` (raw samples), `report.json`.",
        "",
    ]
    return "\n".join(lines)


def admission_section(s: Scenario, rec: Recording) -> list[str]:
    """Each training Job through Kueue: created, admitted, first pod, finished, and what it
    queued behind; then the queue's GPU quota as the sync changed it."""

    def clock(t: float | None) -> str:
        return "—" if t is None else sim_clock(s, rec.day_start, t)

    lines = [
        "",
        "## Training admission (Kueue)",
        "",
        "Times from the apiserver (Job and pod creationTimestamp, the Workload's Admitted and Finished "
        f"conditions), on the simulated clock; they have one-second resolution (= {s.sim(1.0) / 60:.0f} "
        "simulated minutes).",
        "",
        "| job | GPUs | created | admitted | first pod | finished | queued | queued while |",
        "|---|---:|---|---|---|---|---:|---|",
    ]
    for a in rec.admissions:
        waited = (a.admitted if a.admitted is not None else rec.end) - a.created if a.created else 0.0
        lines.append(
            f"| {a.job} | {a.gpus} | {clock(a.created)} | {clock(a.admitted)} | {clock(a.first_pod)} | "
            f"{clock(a.finished)} | {_hours(s.sim(max(0.0, waited)))} | {', '.join(queued_behind(a, rec)) or '—'} |"
        )
    never = [a.job for a in rec.admissions if a.created is not None and a.admitted is None]
    if never:
        lines.append(f"\nNot admitted by the end of the recording: {', '.join(never)}.")
    steps = quota_steps(rec)
    if steps:
        text = " → ".join(f"{q} GPUs at {sim_clock(s, rec.day_start, t)}" for t, q in steps)
        lines += [
            "",
            f"ClusterQueue quota (local-gpu GPUs, kept by the quota sync in vkprovider serve): {text}.",
        ]
    return lines


def queued_behind(a: Admission, rec: Recording) -> list[str]:
    """The other training Jobs that were admitted and not finished while ``a`` waited."""
    if a.created is None:
        return []
    waited_until = a.admitted if a.admitted is not None else rec.end
    out = []
    for other in rec.admissions:
        if other is a or other.admitted is None:
            continue
        ran_until = other.finished if other.finished is not None else rec.end
        if other.admitted < waited_until and ran_until > a.created and waited_until - a.created > 1:
            out.append(f"{other.job} ran")
    return out


def quota_steps(rec: Recording) -> list[tuple[float, int]]:
    """(time, GPU quota) each time the sampled quota changed, from the day's start."""
    steps: list[tuple[float, int]] = []
    for x in rec.samples:
        if x.queue_gpus is not None and (not steps or steps[-1][1] != x.queue_gpus):
            steps.append((max(x.t, rec.day_start), x.queue_gpus))
    return steps


def summary(rec: Recording) -> dict[str, Any]:
    s, c, inv = compute(rec)
    return {
        "scenario": s.name,
        "scale": s.scale,
        "day_start": rec.day_start,
        "day_end": rec.day_end,
        "billed_until": rec.end,
        "components": rec.components,
        "ledger_source": rec.ledger_source,
        "providers": [asdict(p) for p in c.providers],
        "total": asdict(c.total),
        "baselines": [asdict(b) for b in c.baselines],
        "service_money": service_money(s, rec.samples, rec.day_start, rec.day_end),
        "invariants": {
            "lost": inv.lost,
            "orphans": inv.orphans,
            "duplicates": inv.duplicates,
            "workloads": [asdict(w) for w in inv.workloads],
            "gang": inv.gang,
        },
        "quota_steps": quota_steps(rec),
        "admissions": [
            {**asdict(a), "queued_behind": [q.removesuffix(" ran") for q in queued_behind(a, rec)]}
            for a in rec.admissions
        ],
    }


def write(rec: Recording, folder: Path) -> Path:
    """Write every report file into ``folder``; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    s = parse_scenario(rec.scenario, "recording")
    rec.save(folder / "recording.json")
    (folder / "report.md").write_text(markdown(rec))
    (folder / "events.csv").write_text(
        events_csv(s, rec.day_start, changes(rec.samples, rec.actions, rec.ledgers))
    )
    (folder / "report.json").write_text(json.dumps(summary(rec), indent=1))
    chart.draw(s, rec, folder / "timeline.png")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkprovider.sim.report", description=__doc__)
    parser.add_argument("folder", type=Path, help="a report folder holding recording.json")
    args = parser.parse_args(argv)
    write(Recording.load(args.folder / "recording.json"), args.folder)
    print(args.folder / "report.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
