"""What must never happen, checked from the recording (pure). Every one is part of the run's
verdict (:attr:`Invariants.broken`): ``make demo`` exits non-zero naming the first that broke.

Per workload, over the sampled day (simulated minutes):

- **short**: replica-minutes below the desired count (desired - Ready); reported, not a verdict;
- **below the PDB floor**: minutes with fewer Ready replicas than the PDB allows, outside the
  excuse windows. A window opens for the workloads an event touched (a scale action or any rise
  of the desired count, e.g. by an HPA: that workload; a training start or, through Kueue, an
  admission: the workloads that lost local replicas right after it) and lasts one start-up plus the slack (``Scenario.excuse_seconds``).
  The return home is never excused: that is where PDB pacing must hold;
- **lost**: short for longer than ``Scenario.lost_after`` (default: the excuse window);
- **ghost-Ready**: replica-minutes of external pods Ready while no ledger entry of theirs was
  serving (created + start-up + model load, and not yet ended): vkprovider's own Ready checked
  against the providers' books.

Across the run:

- **orphans**: provider deployments billing while no pod of theirs existed, from every sample
  (minutes and money), and those left after settling;
- **duplicates**: one pod UID billed by two deployments at the same time (any providers);
- **gang** (training via Kueue): no training pod existed before its Job was admitted — none
  created before the Workload's Admitted time, none seen in a sample while it was queued;
- **traffic**: every workload's Service got requests all day and not one failed — through every
  burst and every return (:mod:`vkprovider.sim.traffic`; not checked when no load was driven).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from vkprovider.devcluster.loadgen import RequestRecord
from vkprovider.sim.record import Action, Admission, LedgerEntry, Sample
from vkprovider.sim.scenario import Scenario
from vkprovider.sim.traffic import traffic_broken

#: a ledger entry serves this long (real seconds) before its pod may be Ready: clocks are the same
#: host's, so this only absorbs float rounding between the fakecloud's and the sampler's reads
SERVING_TOLERANCE = 0.1


@dataclass
class WorkloadInvariant:
    workload: str
    floor: int  #: PDB floor at the configured replica count
    min_ready: int
    short_replica_minutes: float = 0.0  #: simulated, desired - Ready
    below_floor_minutes: float = 0.0  #: simulated, whole day
    below_floor_unexcused_minutes: float = 0.0  #: simulated, outside this workload's excuse windows
    ghost_ready_replica_minutes: float = 0.0  #: Ready external pods with no serving ledger entry
    lost: int = 0
    lost_episodes: list[tuple[float, float, int]] = field(default_factory=list)  #: (start, end, lost)
    excuses: list[tuple[float, float, str]] = field(default_factory=list)  #: (start, end, why)


@dataclass
class Invariants:
    workloads: list[WorkloadInvariant]
    lost: int
    orphans: list[str]  #: after settling
    duplicates: list[str]  #: "uid: provider/deployment + provider/deployment"
    redeployed: list[str]  #: UIDs deployed more than once one after another (not at once)
    gang: list[str] = field(default_factory=list)  #: training pods that existed before admission
    orphan_minutes: float = 0.0  #: simulated deployment-minutes billed without a pod, from the samples
    orphan_money: float = 0.0  #: simulated
    orphans_seen: list[str] = field(default_factory=list)  #: provider/deployment (pod uid), from the samples
    #: the traffic invariant (:func:`vkprovider.sim.traffic.traffic_broken`): failed or missing requests
    traffic: list[str] = field(default_factory=list)

    @property
    def broken(self) -> list[str]:
        """Each broken invariant in a few words, naming what broke; empty when the run is clean."""
        out = []
        for w in self.workloads:
            if w.below_floor_unexcused_minutes > 0:
                out.append(
                    f"{w.workload} below its PDB floor ({w.floor}) for "
                    f"{w.below_floor_unexcused_minutes:.0f} min outside excuse windows"
                )
            if w.ghost_ready_replica_minutes > 0:
                out.append(
                    f"{w.workload}: {w.ghost_ready_replica_minutes:.0f} ghost-Ready replica-min "
                    "(Ready external pods no ledger entry served)"
                )
        if self.lost:
            out.append(f"{self.lost} pods lost")
        if self.orphans:
            out.append(f"{len(self.orphans)} orphaned deployments after settling")
        if self.orphan_minutes > 0:
            out.append(
                f"orphans billed {self.orphan_minutes:.0f} deployment-min (${self.orphan_money:,.2f}) during the day"
            )
        if self.duplicates:
            out.append(f"{len(self.duplicates)} duplicate deployments")
        if self.gang:
            out.append(f"{len(self.gang)} gang admission violations")
        out += self.traffic
        return out

    @property
    def ok(self) -> bool:
        return not self.broken


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


def excuse_windows(
    s: Scenario, name: str, samples: list[Sample], actions: list[Action], admitted: tuple[float, ...]
) -> list[tuple[float, float, str]]:
    """(start, end, why) for the disruptions that touched workload ``name``: its own scale
    actions and any rise of its desired count (an HPA scales without an action), and training
    starts / admissions after which it lost local replicas or their readiness."""
    window = s.excuse_seconds
    out = [(a.t, a.t + window, "scaled") for a in actions if a.kind == "scale" and a.subject == name]
    for before_sample, after_sample in itertools.pairwise(samples):  # an HPA scales without an action
        was, now = before_sample.workloads.get(name), after_sample.workloads.get(name)
        if was is not None and now is not None and now.desired > was.desired:
            out.append((after_sample.t, after_sample.t + window, "desired rose"))
    starts = [(a.t, f"training {a.subject}") for a in actions if a.kind == "training-start"]
    starts += [(t, "admission") for t in admitted]
    for t0, why in starts:
        before = [x.workloads[name] for x in samples if x.t < t0 and name in x.workloads]
        if not before:
            continue
        after = [x.workloads[name] for x in samples if t0 <= x.t <= t0 + window and name in x.workloads]
        # Touched: it lost local replicas, or local replicas lost readiness without leaving (a
        # preempted pod whose replacement the scheduler put on another local node)
        if after and (
            min(w.local for w in after) < before[-1].local
            or min(w.ready_local for w in after) < before[-1].ready_local
        ):
            out.append((t0, t0 + window, f"{why} preempted it"))
    return sorted(out)


def serving_at(s: Scenario, entry: LedgerEntry, t: float, since: float | None = None) -> bool:
    """Whether a ledger entry's deployment was serving at some moment of ``[since, t]`` (the pod
    list's window): fakecloud serves a fixed provisioning + model-load time after the create it
    bills from, until it ends."""
    p = next((p for p in s.providers if p.name == entry.provider), None)
    ready = s.real(p.startup + p.ready_after) if p else 0.0
    begin = t if since is None else since
    return entry.started_at + ready <= t + SERVING_TOLERANCE and (
        entry.ended_at is None or begin < entry.ended_at
    )


def workload_invariant(
    s: Scenario,
    name: str,
    samples: list[Sample],
    actions: list[Action],
    admitted: tuple[float, ...] = (),
    ledgers: dict[str, list[LedgerEntry]] | None = None,
) -> WorkloadInvariant:
    w = s.workload(name)
    configured = w.hpa.min_replicas if w.hpa else w.replicas
    result = WorkloadInvariant(name, w.pdb.floor(configured) if w.pdb else 0, min_ready=10**9)
    result.excuses = excuse_windows(s, name, samples, actions, admitted)
    by_uid: dict[str, list[LedgerEntry]] = {}
    for e in (e for es in (ledgers or {}).values() for e in es):
        by_uid.setdefault(e.uid, []).append(e)
    short_since: float | None = None
    worst_after_grace: int | None = None
    for here, after in zip(samples, [*samples[1:], None], strict=False):
        ws = here.workloads.get(name)
        if ws is None:
            continue
        result.min_ready = min(result.min_ready, ws.ready)
        minutes = s.sim((after.t if after else here.t) - here.t) / 60.0
        floor = w.pdb.floor(ws.desired) if w.pdb else 0
        result.short_replica_minutes += max(0, ws.desired - ws.ready) * minutes
        if ws.ready < floor:
            result.below_floor_minutes += minutes
            if not any(t0 <= here.t <= t1 for t0, t1, _ in result.excuses):
                result.below_floor_unexcused_minutes += minutes
        if ledgers is not None:
            ghosts = [
                uid
                for uid in ws.ready_external_uids
                if not any(serving_at(s, e, here.t, here.pods_at) for e in by_uid.get(uid, []))
            ]
            result.ghost_ready_replica_minutes += len(ghosts) * minutes
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


def orphans_over_time(
    s: Scenario, samples: list[Sample], ledgers: dict[str, list[LedgerEntry]]
) -> tuple[float, float, list[str]]:
    """(deployment-minutes, money, which) billed while their pod did not exist, from every sample
    that recorded the virtual node's pods (simulated minutes and money)."""
    entries = [e for es in ledgers.values() for e in es]
    minutes, money, seen = 0.0, 0.0, set()
    for here, after in itertools.pairwise(samples):
        if here.virtual_pod_uids is None:
            continue
        pods = set(here.virtual_pod_uids)
        listed = here.t if here.pods_at is None else here.pods_at
        for e in entries:  # created after the pod list: its pod may be newer than the list
            if e.open_at(here.t) and e.started_at <= listed and e.uid not in pods:
                span = s.sim(min(after.t, e.ended_at if e.ended_at is not None else after.t) - here.t)
                minutes += span / 60.0
                money += e.price_per_hour * span / 3600.0
                seen.add(f"{e.provider}/{e.deployment_id} (pod {e.uid})")
    return minutes, money, sorted(seen)


def invariants(
    s: Scenario,
    samples: list[Sample],
    actions: list[Action],
    ledgers: dict[str, list[LedgerEntry]],
    orphans: list[str],
    admissions: list[Admission] | None = None,
    traffic: dict[str, list[RequestRecord]] | None = None,
    day_start: float = 0.0,
) -> Invariants:
    admitted = tuple(a.admitted for a in admissions or [] if a.admitted is not None)
    if admissions:  # through Kueue a Job preempts when admitted, not when it arrives
        actions = [a for a in actions if a.kind != "training-start"]
    per_workload = [workload_invariant(s, w.name, samples, actions, admitted, ledgers) for w in s.workloads]
    entries = [e for es in ledgers.values() for e in es]
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.uid] = counts.get(e.uid, 0) + 1
    duplicates = overlaps(entries)
    twice = {d.split(":", 1)[0] for d in duplicates}
    redeployed = sorted(uid for uid, n in counts.items() if n > 1 and uid not in twice)
    orphan_minutes, orphan_money, orphans_seen = orphans_over_time(s, samples, ledgers)
    return Invariants(
        per_workload,
        sum(w.lost for w in per_workload),
        list(orphans),
        duplicates,
        redeployed,
        gang_violations(samples, admissions or []),
        orphan_minutes,
        orphan_money,
        orphans_seen,
        traffic_broken(s, traffic, day_start),
    )
