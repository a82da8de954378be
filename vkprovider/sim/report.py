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

from vkprovider.sim import chart, manifests, traffic
from vkprovider.sim.costs import Costs, costs, ledger_money_between, service_money
from vkprovider.sim.ideal import Policy
from vkprovider.sim.invariants import Invariants, invariants
from vkprovider.sim.record import Admission, Recording
from vkprovider.sim.scenario import Scenario, parse_scenario
from vkprovider.sim.service_config import serve_config
from vkprovider.sim.timeline import changes, events_csv, sim_clock
from vkprovider.sim.traffic import REQUEST_TIMEOUT_SECONDS
from vkprovider.traffic.config import TrafficConfig


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
    inv = invariants(
        s, rec.samples, rec.actions, rec.ledgers, rec.orphans, rec.admissions, rec.traffic, rec.day_start
    )
    return s, c, inv


def markdown(rec: Recording) -> str:
    s, c, inv = compute(rec)
    total = c.total
    lines = [
        f"# Simulation report: {s.name}",
        "",
        verdict(inv, rec.traffic is not None),
        "",
        s.description.strip(),
        "",
    ]
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
    if not any(rec.day_start <= x.t <= rec.day_end for x in rec.samples):
        lines.append("- **no samples during the day**: no chart, and nothing below was observed")
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
        *policy_section(s, c, inv),
        *availability_section(s, inv),
        *traffic_section(s, rec),
    ]
    if s.training.kueue:
        lines += admission_section(s, rec)
    lines += resolution_section(s)
    lines += [
        "",
        "Files: `timeline.png`, `events.csv` (every state change), `recording.json` (raw samples), `report.json`.",
        "",
    ]
    return "\n".join(lines)


def verdict(inv: Invariants, traffic_measured: bool = True) -> str:
    """The first thing the report says: whether every invariant held, and if not, which broke."""
    unmeasured = "" if traffic_measured else " Traffic was not measured (no data path, see the notes)."
    if inv.ok:
        return (
            "**Verdict: every invariant held** (availability, PDB floors, ghost-Ready, orphans, duplicates, "
            f"gang, no failed request).{unmeasured}"
        )
    return "**Verdict: BROKEN** — " + "; ".join(inv.broken) + f". `make demo` exits 3.{unmeasured}"


def _against(run: float, policy: Policy) -> str:
    saved = policy.money - run
    if abs(saved) < 0.005:
        return "equal"
    share = f" ({abs(saved) / policy.money:.0%})" if policy.money else ""
    return f"${abs(saved):,.2f}{share} {'less' if saved > 0 else 'more'}"


def policy_section(s: Scenario, c: Costs, inv: Invariants) -> list[str]:
    """This run against the ideal and the counterfactuals of the same day, each defined below."""
    total = c.total
    short = sum(w.short_replica_minutes for w in inv.workloads) / 60.0
    lines = [
        "## This run against the ideal and the counterfactuals of the same day",
        "",
        "| policy | external GPU-hours | cost | replica-hours short | lowest Ready | this run against it |",
        "|---|---:|---:|---:|---|---:|",
        f"| **this run** | {total.gpu_hours:.1f} | ${total.money:,.2f} | {short:.1f} | "
        + ", ".join(f"{w.workload} {w.min_ready} (floor {w.floor})" for w in inv.workloads)
        + " | |",
    ]
    for p in c.policies:
        down = p.unserved_replica_hours + p.not_ready_replica_hours
        lowest = ", ".join(f"{n} {v}" for n, v in p.min_ready.items()) if p.min_ready else "—"
        lines.append(
            f"| {p.name} | {p.gpu_hours:.1f} | ${p.money:,.2f} | {down:.1f} | {lowest} | "
            f"{_against(total.money, p)} |"
        )
    lines += [
        "",
        "- **this run**: the ledgers (table above); short = desired - Ready replicas, start-ups included",
    ]
    lines += [f"- **{p.name}**: {p.definition}" for p in c.policies]
    ideal = c.policies[0]
    if total.money < ideal.money - 0.005:
        lines.append(
            "- this run cost less than the ideal: it served fewer replica-hours than the ideal does (see "
            "replica-hours short), or acted between two samples (the ideal's resolution)"
        )
    return [*lines, ""]


def availability_section(s: Scenario, inv: Invariants) -> list[str]:
    lines = [
        "## Availability and invariants",
        "",
        "| workload | PDB floor | min Ready | replica-min short | below floor (all day) | below floor, unexcused "
        "| ghost-Ready replica-min | lost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in inv.workloads:
        lines.append(
            f"| {w.workload} | {w.floor} | {w.min_ready} | {w.short_replica_minutes:.0f} | "
            f"{w.below_floor_minutes:.0f} min | **{w.below_floor_unexcused_minutes:.0f} min** | "
            f"**{w.ghost_ready_replica_minutes:.0f}** | **{w.lost}** |"
        )
    lines += [
        "",
        f"Excuse windows: after a disruption that touched a workload (its scale action or a rise of its desired "
        "count; a training start or "
        f"admission after which it lost local replicas or their readiness), {s.excuse_seconds:.1f} s = "
        f"{s.sim(s.excuse_seconds) / 60:.0f} simulated min (the slowest start-up {s.startup_seconds:.1f} s + "
        f"slack {s.slack_seconds:.1f} s). Ghost-Ready: a Ready external pod whose ledger entry was not serving "
        "(created + start-up + model load, not ended).",
    ]
    for w in inv.workloads:
        if w.excuses:
            spans = ", ".join(f"{why}" for _, _, why in w.excuses)
            lines.append(f"- {w.workload} excused {len(w.excuses)}x: {spans}")
    lines += [
        "",
        f"- pods lost: **{inv.lost}** (replicas still missing {s.lost_after:.1f} s = "
        f"{s.sim(s.lost_after) / 60:.0f} simulated min after a workload fell short)",
        f"- orphaned deployments at the end: **{len(inv.orphans)}**"
        + (f" ({', '.join(inv.orphans)})" if inv.orphans else ""),
        f"- orphans during the day (billing while their pod did not exist, every sample): "
        f"**{inv.orphan_minutes:.0f} deployment-min, ${inv.orphan_money:,.2f}**"
        + (f" ({', '.join(inv.orphans_seen)})" if inv.orphans_seen else ""),
        f"- duplicate deployments (one pod UID billed twice at once): **{len(inv.duplicates)}**"
        + (f" ({'; '.join(inv.duplicates)})" if inv.duplicates else ""),
        f"- pod UIDs deployed again after an earlier deployment ended: {len(inv.redeployed)}",
    ]
    if s.training.kueue:
        lines.append(
            "- gang admission (no training pod before its Job was admitted, none while queued): "
            f"**{len(inv.gang)}** violations" + (f" ({'; '.join(inv.gang)})" if inv.gang else "")
        )
    return lines


def _ms_pair(p50: float | None, p99: float | None) -> str:
    return "—" if p50 is None or p99 is None else f"{p50:.1f} / {p99:.1f}"


def traffic_section(s: Scenario, rec: Recording) -> list[str]:
    """Per workload: requests, failed, who answered, p50/p99 latency local vs external — from
    the load generator's own records."""
    lines = ["", "## Traffic", ""]
    if rec.traffic is None:
        return [*lines, "Not measured: the data path did not start on this machine (see the notes)."]
    try:
        rows = traffic.traffic_table(s, rec)
    except traffic.NoTraffic:
        return [*lines, "**No request was recorded**: the load generators did not run (see the notes)."]
    providers = [p.name for p in s.providers]
    lines += [
        "Each workload's Service (no `trafficDistribution`: every Ready replica takes its share) got its `requests_per_second` "
        "all day from a load generator in the node namespace, through kube-proxy (nftables): one new "
        f"connection per request, {REQUEST_TIMEOUT_SECONDS:g} s (real) to answer, else it failed. Figures "
        "from the generator's own records (`traffic` in recording.json); latencies are real milliseconds "
        "(requests are not compressed).",
        "",
        "| workload | req/s | requests | **failed** | answered locally | "
        + " | ".join(f"answered by {p}" for p in providers)
        + " | p50 / p99 local (ms) | p50 / p99 external (ms) |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(providers) + "---:|---:|",
    ]
    for row in rows:
        rate = s.workload(row.workload).requests_per_second
        lines.append(
            f"| {row.workload} | {rate:g} | {row.requests} | **{row.failed}** | {row.answered.get('local', 0)} | "
            + " | ".join(str(row.answered.get(p, 0)) for p in providers)
            + f" | {_ms_pair(row.local_p50_ms, row.local_p99_ms)} | "
            f"{_ms_pair(row.external_p50_ms, row.external_p99_ms)} |"
        )
    for row in rows:
        if row.errors:
            why = "; ".join(f"{n}x {error}" for error, n in row.errors.items())
            lines.append(f"- {row.workload}: failed requests: {why}")
    return lines


def resolution_section(s: Scenario) -> list[str]:
    """What one real second is on the simulated clock: every fixed wall-clock interval of the run
    is that many simulated minutes of the day, and of billing."""
    config = serve_config(s, {}, Path("kubeconfig"), 0)
    rows: list[tuple[str, float]] = [
        ("sampling (runtime.sample_seconds)", s.runtime.sample_seconds),
        ("apiserver timestamps (Job, pod, Workload)", 1.0),
        ("vkprovider status poll (pods.status_poll_seconds)", config["pods"]["status_poll_seconds"]),
        ("vkprovider lost grace (pods.lost_grace_seconds)", config["pods"]["lost_grace_seconds"]),
        ("vkprovider orphan GC (pods.orphan_gc_seconds)", config["pods"]["orphan_gc_seconds"]),
        ("offer refresh (placement.offer_refresh_seconds)", config["placement"]["offer_refresh_seconds"]),
        ("node status update (node.status_update_seconds)", config["node"]["status_update_seconds"]),
        ("Descheduler run (runtime.descheduler_interval_seconds)", s.runtime.descheduler_interval_seconds),
    ]
    gate = config.get("gate")
    if gate:
        rows += [
            ("gate interval (gate.interval_seconds)", float(gate["interval_seconds"])),
            ("gate dwell (gate.dwell_seconds)", float(gate["dwell_seconds"])),
            ("gate min flip interval", float(gate["min_flip_interval_seconds"])),
        ]
    if s.training.kueue:
        rows.append(("quota sync (training.quota_sync_seconds)", s.training.quota_sync_seconds))
    drain_max = config.get("traffic", {}).get("drain_max_seconds", TrafficConfig().drain_max_seconds)
    rows += [
        ("inference grace period (terminationGracePeriodSeconds)", manifests.INFERENCE_GRACE_SECONDS),
        (
            "external drain: endpoint terminating → deployment stopped (the grace, at most "
            f"traffic.drain_max_seconds {drain_max:g})",
            min(manifests.INFERENCE_GRACE_SECONDS, drain_max),
        ),
        ("request timeout (a request not answered by then failed)", REQUEST_TIMEOUT_SECONDS),
        ("excuse window (start-up + slack)", s.excuse_seconds),
        ("lost after", s.lost_after),
    ]
    lines = [
        "",
        "## Time resolution",
        "",
        f"The control loops run in wall time while the day runs x{s.scale:g}: each fixed real interval "
        "below is that many simulated minutes of the day (and of billing, when a loop is what ends an instance).",
        "",
        "| what | real seconds | simulated minutes |",
        "|---|---:|---:|",
    ]
    lines += [f"| {what} | {real:g} | {s.sim(real) / 60:.1f} |" for what, real in rows]
    return lines


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


def traffic_rows(s: Scenario, rec: Recording) -> list[dict[str, Any]] | None:
    """The traffic table as data; None when no request was recorded (or none was driven)."""
    try:
        return [asdict(row) for row in traffic.traffic_table(s, rec)]
    except traffic.NoTraffic:
        return None


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
        "policies": [{k: v for k, v in asdict(p).items() if k != "cumulative"} for p in c.policies],
        "verdict": {"ok": inv.ok, "broken": inv.broken},
        "service_money": service_money(s, rec.samples, rec.day_start, rec.day_end),
        "invariants": {
            "lost": inv.lost,
            "orphans": inv.orphans,
            "orphan_minutes": inv.orphan_minutes,
            "orphan_money": inv.orphan_money,
            "orphans_seen": inv.orphans_seen,
            "duplicates": inv.duplicates,
            "workloads": [asdict(w) for w in inv.workloads],
            "gang": inv.gang,
        },
        "traffic": traffic_rows(s, rec),
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
    try:
        chart.draw(s, rec, folder / "timeline.png")
    except chart.EmptyRecording:
        (folder / "timeline.png").unlink(missing_ok=True)  # no stale chart from an earlier write
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
