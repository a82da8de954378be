"""What must never happen, checked from the recording (pure).

- **Ready vs PDB**: the fewest Ready replicas each workload had, against its budget's floor. A
  training Job preempting inference and a scale-up both leave a workload short for a while by
  design (preemption honours PDBs only best-effort); those windows (``Scenario.lost_after`` after
  a training start or a scale action) are shown separately from the rest of the day.
- **lost**: a workload short of Ready replicas for longer than ``Scenario.lost_after``; the
  replicas still missing after that long count as lost.
- **orphans**: provider deployments without a pod at the end (after settling).
- **duplicates**: one pod UID billed by two deployments at the same time (any providers).
- **gang** (training via Kueue): no training pod existed before its Job was admitted — none
  created before the Workload's Admitted time, none seen in a sample while it was queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vkprovider.sim.record import Action, Admission, LedgerEntry, Sample
from vkprovider.sim.scenario import Scenario

EXCUSING = ("training-start", "scale")


@dataclass
class WorkloadInvariant:
    workload: str
    floor: int  #: PDB floor at the configured replica count
    min_ready: int
    below_floor_seconds: float = 0.0  #: simulated, whole day
    below_floor_unexcused_seconds: float = 0.0  #: simulated, outside preemption/scale-up windows
    lost: int = 0
    lost_episodes: list[tuple[float, float, int]] = field(default_factory=list)  #: (start, end, lost)


@dataclass
class Invariants:
    workloads: list[WorkloadInvariant]
    lost: int
    orphans: list[str]
    duplicates: list[str]  #: "uid: provider/deployment + provider/deployment"
    redeployed: list[str]  #: UIDs deployed more than once one after another (not at once)
    gang: list[str] = field(default_factory=list)  #: training pods that existed before admission

    @property
    def ok(self) -> bool:
        return not (self.lost or self.orphans or self.duplicates or self.gang)


def gang_violations(samples: list[Sample], admissions: list[Admission]) -> list[str]:
    found = []
    for a in admissions:
        if a.first_pod is not None and (a.admitted is None or a.first_pod < a.admitted):
            when = (
                "never admitted"
                if a.admitted is None
                else f"{a.admitted - a.first_pod:.0f}s before admission"
            )
            found.append(f"{a.job}: first pod created {when}")
        queued = [
            x
            for x in samples
            if (tr := x.training.get(a.job)) and tr.state == "queued" and tr.running + tr.pending
        ]
        if queued:
            found.append(f"{a.job}: pods seen in {len(queued)} samples while queued")
    return found


def overlaps(entries: list[LedgerEntry]) -> list[str]:
    by_uid: dict[str, list[LedgerEntry]] = {}
    for e in entries:
        by_uid.setdefault(e.uid, []).append(e)
    found = []
    for uid, items in sorted(by_uid.items()):
        items.sort(key=lambda e: e.started_at)
        for i, a in enumerate(items):
            a_end = float("inf") if a.ended_at is None else a.ended_at
            for b in items[i + 1 :]:
                if b.started_at < a_end:
                    found.append(f"{uid}: {a.provider}/{a.deployment_id} + {b.provider}/{b.deployment_id}")
    return found


def _excused(s: Scenario, actions: list[Action], t: float, admitted: tuple[float, ...] = ()) -> bool:
    """Inside a preemption or scale-up window: after a training start or scale action, or (via
    Kueue) after an admission, when the gang's pods preempt."""
    window = s.lost_after
    starts = [a.t for a in actions if a.kind in EXCUSING] + list(admitted)
    return any(t0 <= t <= t0 + window for t0 in starts)


def workload_invariant(
    s: Scenario, name: str, samples: list[Sample], actions: list[Action], admitted: tuple[float, ...] = ()
) -> WorkloadInvariant:
    w = s.workload(name)
    configured = w.hpa.min_replicas if w.hpa else w.replicas
    result = WorkloadInvariant(name, w.pdb.floor(configured) if w.pdb else 0, min_ready=10**9)
    short_since: float | None = None
    worst_after_grace: int | None = None
    for here, after in zip(samples, [*samples[1:], None], strict=False):
        ws = here.workloads.get(name)
        if ws is None:
            continue
        result.min_ready = min(result.min_ready, ws.ready)
        dt = ((after.t if after else here.t) - here.t) * s.scale
        floor = w.pdb.floor(ws.desired) if w.pdb else 0
        if ws.ready < floor:
            result.below_floor_seconds += dt
            if not _excused(s, actions, here.t, admitted):
                result.below_floor_unexcused_seconds += dt
        shortfall = max(0, ws.desired - ws.ready)
        if shortfall and short_since is None:
            short_since = here.t
        if short_since is not None and shortfall and here.t - short_since > s.lost_after:
            worst_after_grace = shortfall if worst_after_grace is None else min(worst_after_grace, shortfall)
        if short_since is not None and (not shortfall or after is None):
            if worst_after_grace:
                result.lost += worst_after_grace
                result.lost_episodes.append((short_since, here.t, worst_after_grace))
            short_since, worst_after_grace = None, None
    if result.min_ready == 10**9:
        result.min_ready = 0
    return result


def invariants(
    s: Scenario,
    samples: list[Sample],
    actions: list[Action],
    ledgers: dict[str, list[LedgerEntry]],
    orphans: list[str],
    admissions: list[Admission] | None = None,
) -> Invariants:
    admitted = tuple(a.admitted for a in admissions or [] if a.admitted is not None)
    if admissions:  # through Kueue a Job preempts when admitted, not when it arrives
        actions = [a for a in actions if a.kind != "training-start"]
    per_workload = [workload_invariant(s, w.name, samples, actions, admitted) for w in s.workloads]
    entries = [e for es in ledgers.values() for e in es]
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.uid] = counts.get(e.uid, 0) + 1
    duplicates = overlaps(entries)
    twice = {d.split(":", 1)[0] for d in duplicates}
    redeployed = sorted(uid for uid, n in counts.items() if n > 1 and uid not in twice)
    return Invariants(
        per_workload,
        sum(w.lost for w in per_workload),
        list(orphans),
        duplicates,
        redeployed,
        gang_violations(samples, admissions or []),
    )
