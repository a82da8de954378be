"""Every state change of a run, with its time: the runner's actions, what changed between two
samples (replicas local/external/Ready, training pods, gate taint, cordons) and each ledger
entry's start and end. Pure; ``events.csv`` and the live view's event list come from here.
"""

from __future__ import annotations

import csv
import io
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime

from vkprovider.sim.record import Action, LedgerEntry, Sample
from vkprovider.sim.scenario import Scenario


@dataclass(frozen=True)
class Change:
    t: float  #: unix seconds
    kind: str
    subject: str
    detail: str


def sim_clock(s: Scenario, day_start: float, t: float) -> str:
    """``HH:MM`` of the simulated day: ``+1d 01:00`` past midnight (never ``25:00``), ``-00:05``
    before the day starts."""
    seconds = s.sim(t - day_start)
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(int(seconds // 60), 24 * 60)
    clock = f"{rest // 60:02d}:{rest % 60:02d}"
    if sign:
        return f"-{days * 24 + rest // 60:02d}:{rest % 60:02d}" if days else f"-{clock}"
    return f"+{days}d {clock}" if days else clock


def gate_words(tainted: bool | None) -> str:
    if tainted is None:
        return "no virtual node"
    return "local capacity free: new pods stay home" if tainted else "bursting allowed"


def sample_changes(before: Sample, after: Sample) -> list[Change]:
    out: list[Change] = []
    for name, w in after.workloads.items():
        b = before.workloads.get(name)
        if b is None:
            continue
        parts = []
        for label, old, new in (
            ("desired", b.desired, w.desired),
            ("local", b.local, w.local),
            ("external", b.external, w.external),
            ("pending", b.pending, w.pending),
            ("ready", b.ready, w.ready),
        ):
            if old != new:
                parts.append(f"{label} {old}->{new}")
        if parts:
            out.append(Change(after.t, "replicas", name, ", ".join(parts)))
    for name, tr in after.training.items():
        b_tr = before.training.get(name)
        if b_tr is not None and b_tr.state != tr.state and tr.state:
            out.append(Change(after.t, "admission", name, f"Kueue: {b_tr.state or 'new'} -> {tr.state}"))
        if b_tr is not None and (b_tr.running, b_tr.pending) != (tr.running, tr.pending):
            detail = (
                f"running {b_tr.running}->{tr.running}, pending {b_tr.pending}->{tr.pending}, {tr.gpus} GPUs"
            )
            out.append(Change(after.t, "training-pods", name, detail))
    if before.queue_gpus != after.queue_gpus and after.queue_gpus is not None:
        out.append(
            Change(after.t, "quota", "ClusterQueue", f"local GPUs {before.queue_gpus}->{after.queue_gpus}")
        )
    if before.gate_tainted != after.gate_tainted:
        out.append(Change(after.t, "gate", "virtual node", gate_words(after.gate_tainted)))
    for node in sorted(set(after.cordoned) - set(before.cordoned)):
        out.append(Change(after.t, "node", node, "cordoned"))
    for node in sorted(set(before.cordoned) - set(after.cordoned)):
        out.append(Change(after.t, "node", node, "schedulable again"))
    return out


def ledger_changes(ledgers: dict[str, list[LedgerEntry]]) -> list[Change]:
    out = []
    for provider, entries in ledgers.items():
        for e in entries:
            what = f"{e.deployment_id} pod {e.uid[:8]} {e.gpus}x{e.gpu_type} at {e.price_per_hour:.2f}/h"
            out.append(Change(e.started_at, "billing-start", provider, what))
            if e.ended_at is not None:
                reason = f" ({e.end_reason})" if e.end_reason else ""
                out.append(
                    Change(e.ended_at, "billing-end", provider, f"{e.deployment_id} pod {e.uid[:8]}{reason}")
                )
    return out


def changes(
    samples: list[Sample], actions: list[Action], ledgers: dict[str, list[LedgerEntry]]
) -> list[Change]:
    out = [Change(a.t, a.kind, a.subject, a.detail) for a in actions]
    if samples:
        first = samples[0]
        for name, w in first.workloads.items():
            detail = f"desired {w.desired}, local {w.local}, external {w.external}, ready {w.ready}"
            out.append(Change(first.t, "initial", name, detail))
        out.append(Change(first.t, "initial", "gate", gate_words(first.gate_tainted)))
        if first.queue_gpus is not None:
            out.append(Change(first.t, "initial", "queue", f"ClusterQueue quota {first.queue_gpus} GPUs"))
    for before, after in itertools.pairwise(samples):
        out.extend(sample_changes(before, after))
    out.extend(ledger_changes(ledgers))
    return sorted(out, key=lambda c: (c.t, c.kind, c.subject))


def events_csv(s: Scenario, day_start: float, items: list[Change]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["time_utc", "real_seconds", "sim_clock", "kind", "subject", "detail"])
    for c in items:
        stamp = datetime.fromtimestamp(c.t, UTC).isoformat(timespec="milliseconds")
        writer.writerow(
            [stamp, f"{c.t - day_start:.2f}", sim_clock(s, day_start, c.t), c.kind, c.subject, c.detail]
        )
    return buffer.getvalue()
