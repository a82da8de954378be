"""After the faults: read the truth (apiserver, fakecloud ledgers, the service's /state, logs and
Events), check the invariants and print them with the fault table.

Each violation carries the moment it happened, so the table attributes it to the fault whose
window (plus a grace for its after-effects) contains that moment, or to "churn only".
"""

from __future__ import annotations

import asyncio
import calendar
import copy
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from vkprovider_fakecloud.ledger import LedgerEntry, overlaps

from tests.chaos import jobs
from tests.chaos.rig import Rig, Window

JSON = dict[str, Any]
AFTER_EFFECT_SECONDS = 15.0
BILL_TAIL_SECONDS = 10.0
#: summaries of the runs of this session, printed by conftest's terminal summary
PRINTED: list[str] = []
ANNOTATION_PROVIDER = "vkprovider.io/provider"
#: the table's row for a control-plane component that died with no fault on it
DIED = "control-plane-died"


@dataclass
class Finding:
    at: float
    text: str


@dataclass
class Report:
    seed: int
    converged: bool = False
    lost: list[Finding] = field(default_factory=list)
    orphans: list[Finding] = field(default_factory=list)
    duplicates: list[Finding] = field(default_factory=list)
    stuck_queue: list[str] = field(default_factory=list)
    secret_leaks: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    loop_crashes: list[Finding] = field(default_factory=list)
    unconverged: list[str] = field(default_factory=list)
    #: Succeeded pods without a cloud-reported exit 0, Jobs counting more completions (jobs.py)
    miscounted: list[Finding] = field(default_factory=list)
    table: str = ""
    ledger_entries: int = 0
    #: informational: deployments that billed on > BILL_TAIL_SECONDS after their pod was gone
    bill_tails: list[str] = field(default_factory=list)
    #: informational: control-plane components that died with no fault on them (see controlplane)
    control_plane: list[str] = field(default_factory=list)
    #: informational: per proxy, connections refused because the apiserver did not take them
    refused: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"chaos seed {self.seed} (replay: VKPROVIDER_CHAOS_SEED={self.seed})",
            f"  replicas Running or being replaced: {'yes' if self.converged else 'NO'}"
            + "".join(f"\n    {u}" for u in self.unconverged),
            *_section("pods lost", [f.text for f in self.lost]),
            *_section("orphaned deployments", [f.text for f in self.orphans]),
            *_section("UIDs with two live deployments", [f.text for f in self.duplicates]),
            *_section("interrupted pods counted as Job completions", [f.text for f in self.miscounted]),
            *_section("keys stuck in the queue", self.stuck_queue),
            *_section("secret values in logs/Events", self.secret_leaks),
            *_section("service exits nobody caused", self.crashes),
            *_section("supervised loops that crashed and restarted", [f.text for f in self.loop_crashes]),
            f"  ledger entries checked: {self.ledger_entries}",
            *_section(
                f"(info) bills running on > {BILL_TAIL_SECONDS:.0f}s after the pod was gone", self.bill_tails
            ),
            *_section("(info) control-plane components that died with no fault on them", self.control_plane),
            *_section("(info) connections the apiserver proxies refused", self.refused),
            self.table,
        ]
        return "\n".join(lines)


def _section(title: str, items: list[str]) -> list[str]:
    lines = [f"  {title}: {len(items)}"]
    lines += [f"    {item}" for item in items[:10]]
    if len(items) > 10:
        lines.append(f"    ... and {len(items) - 10} more")
    return lines


async def collect(rig: Rig) -> Report:
    report = Report(rig.seed)
    report.control_plane = [d.describe() for d in rig.deaths]
    report.refused = [
        f"{name}: {p.refused} (last {p.last_refusal})" for name, p in rig.proxies.items() if p.refused
    ]
    await rig.watch_control_plane()
    if not await rig.wait_for(rig.apiserver_answers, timeout=60):
        # Read as "no pods", every deployment would look orphaned: name the real cause instead.
        raise RuntimeError(
            "the apiserver does not answer the rig: the invariants cannot be read; "
            + ("; ".join(d.describe() for d in rig.deaths) or "no control-plane component died")
        )
    report.converged = await rig.converged()
    pods = await rig.list_pods() or []
    by_uid = {p["metadata"]["uid"]: p for p in pods}
    now = time.time()
    if not report.converged:
        report.unconverged = await _unconverged(rig, pods)

    for pod in pods:
        phase = pod["status"].get("phase")
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp"):
            report.lost.append(
                Finding(now, f"{name}: stuck terminating since {pod['metadata']['deletionTimestamp']}")
            )
        elif phase not in ("Running", "Failed", "Succeeded"):
            reason = _waiting_reason(pod)
            report.lost.append(Finding(now, f"{name}: stuck {phase} ({reason or 'no reason'})"))

    # Ledgers over HTTP, as any consumer reads them.
    entries: list[LedgerEntry] = []
    for cloud in rig.cloud_names:
        body = await rig.admin(cloud, "GET", "/ledger")
        entries += [LedgerEntry.model_validate(e) for e in body["entries"]]
    report.ledger_entries = len(entries)

    # Lost: Failed without a reason at any sample; ProviderLost though no cloud lost it (with
    # the ledger's word on who ended each deployment of the UID); stuck where nobody moves it.
    bills: dict[str, list[LedgerEntry]] = {}
    for entry in entries:
        bills.setdefault(entry.uid, []).append(entry)
    for uid, trace in rig.pods.items():
        if trace.unexplained_failure_at is not None:
            report.lost.append(
                Finding(trace.unexplained_failure_at, f"{trace.name}: Failed without a reason")
            )
        if trace.reason == "ProviderLost" and uid not in rig.injected_losses:
            ended = [e for e in bills.get(uid, []) if e.ended_at is not None]
            how = "; ".join(
                f"{e.provider}/{e.deployment_id} {e.end_reason} at {time.strftime('%H:%M:%S', time.gmtime(e.ended_at))}"
                for e in ended
                if e.ended_at is not None
            )
            at = min((e.ended_at for e in ended if e.ended_at is not None), default=trace.last_seen)
            report.lost.append(
                Finding(
                    at,
                    f"{trace.name} ({uid[:8]}): ProviderLost but no cloud lost it; ledger: {how or 'none'}",
                )
            )
    for overlap in overlaps(entries):
        report.duplicates.append(Finding(overlap.since, overlap.describe()))
    for uid, at in rig.sampled_twins.items():
        if not any(f.text.startswith(f"pod uid {uid}") for f in report.duplicates):
            report.duplicates.append(Finding(at, f"pod uid {uid}: live on two clouds at a sample"))

    for entry in entries:
        trace = rig.pods.get(entry.uid)
        if trace is None or entry.uid in by_uid:
            continue  # not seen by the sampler, or the pod still exists
        tail = (entry.ended_at if entry.ended_at is not None else now) - trace.last_seen
        if tail > BILL_TAIL_SECONDS:
            report.bill_tails.append(f"{trace.name} on {entry.provider}: {tail:.0f}s")

    # Orphans: a deployment whose pod is gone, or placed elsewhere, or terminal but billing.
    open_bills = {(e.provider, e.uid) for e in entries if e.ended_at is None}
    for cloud in rig.cloud_names:
        store = rig.clouds[cloud].store
        for uid, deployment in store.deployments.items():
            pod = by_uid.get(uid)
            started = rig.clouds[cloud].store.wall(deployment.created)
            if pod is None:
                report.orphans.append(
                    Finding(started, f"{cloud}/{deployment.provider_id}: pod {uid} is gone")
                )
                continue
            placed = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_PROVIDER)
            name = pod["metadata"]["name"]
            if placed and placed != cloud:
                report.orphans.append(
                    Finding(started, f"{cloud}/{deployment.provider_id}: pod {name} is placed on {placed}")
                )
            elif pod["status"].get("phase") in ("Failed", "Succeeded") and (cloud, uid) in open_bills:
                report.orphans.append(
                    Finding(
                        started, f"{cloud}/{deployment.provider_id}: pod {name} is terminal, still billing"
                    )
                )

    report.miscounted = await jobs.miscounted_completions(rig, entries)
    report.stuck_queue = await _queue_drains(rig)
    report.secret_leaks = await _secret_leaks(rig)
    for replica in rig.replicas:
        for code, tail in replica.exits:
            last = tail.splitlines()[-1] if tail else ""
            report.crashes.append(f"{replica.identity}: exit {code}: {last[:200]}")
    for replica in rig.replicas:
        report.loop_crashes += loop_crashes(replica.identity, replica.log.read_text(errors="replace"))
    report.table = table(rig, report)
    return report


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
_CRASH = re.compile(r"task (\S+) crashed; restarting")
_EXC = re.compile(r"^([A-Za-z_][\w.]*): ")


def loop_crashes(identity: str, text: str) -> list[Finding]:
    """``supervise`` lines ("task X crashed; restarting") with the exception that ended the
    traceback under them: a loop of the service died and was restarted."""
    found: list[Finding] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        crash, stamp = _CRASH.search(line), _STAMP.match(line)
        if not crash or not stamp:
            continue
        at = calendar.timegm(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")) + int(stamp.group(2)) / 1000
        causes = []
        for following in lines[i + 1 :]:
            if _STAMP.match(following):
                break
            core = following.lstrip(" |+-")  # exception groups indent their sub-tracebacks
            exc = _EXC.match(core)
            if exc and exc.group(1) not in ("ExceptionGroup", "BaseExceptionGroup"):
                causes.append(core.strip())
        cause = causes[-1] if causes else ""
        found.append(Finding(at, f"{identity}: {crash.group(1)} crashed: {cause[:200]}"))
    return found


def _waiting_reason(pod: JSON) -> str:
    for status in pod["status"].get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    conditions = pod["status"].get("conditions") or []
    return next((str(c.get("reason")) for c in conditions if c.get("reason")), "")


async def _unconverged(rig: Rig, pods: list[JSON]) -> list[str]:
    deployments = await rig.kube("GET", f"/apis/apps/v1/namespaces/{rig.namespace}/deployments") or {}
    out = []
    for d in deployments.get("items", []):
        app = d["spec"]["selector"]["matchLabels"]["app"]
        mine = [p for p in pods if p["metadata"].get("labels", {}).get("app") == app]
        states = ", ".join(f"{p['metadata']['name'][-5:]}={_state(p)}" for p in mine)
        out.append(f"{app}: want {d['spec']['replicas']}: {states}")
    return out


def _state(pod: JSON) -> str:
    phase = str(pod["status"].get("phase"))
    if pod["metadata"].get("deletionTimestamp"):
        return phase + "(terminating)"
    ready = next((c for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"), None)
    if phase == "Running" and ready is not None and ready["status"] != "True":
        return f"Running(Ready={ready['status']} since {ready.get('lastTransitionTime')})"
    return phase


async def _queue_drains(rig: Rig) -> list[str]:
    """A key stuck in processing never leaves ``busy``: the queue must reach 0/0 within 60 s."""
    leader = await rig.leader()
    last: Any = None
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            state = await leader.state(client)
            if state is not None:
                last = state["queue"]
                if last.get("busy") == 0 and last.get("waiting") == 0:
                    return []
            await asyncio.sleep(0.2)
    return [f"{leader.identity}: queue never drained, last {last}"]


async def _secret_leaks(rig: Rig) -> list[str]:
    leaks = []
    for replica in rig.replicas:
        for n, line in enumerate(replica.log.read_text(errors="replace").splitlines(), 1):
            if rig.secret_value in line:
                leaks.append(f"{replica.log.name}:{n}: {line[:160]}")
    events = await rig.kube("GET", f"/api/v1/namespaces/{rig.namespace}/events") or {}
    for event in events.get("items", []):
        if rig.secret_value in str(event.get("message", "")) + str(event.get("reason", "")):
            leaks.append(f"Event {event['metadata']['name']}: {event.get('message', '')[:160]}")
    return leaks


def table(rig: Rig, report: Report) -> str:
    """fault x times injected x pods affected x lost / orphaned / duplicated / miscounted Job
    completions."""
    windows = [*rig.windows, *(Window(DIED, d.at, d.restarted_at or d.at, d.component) for d in rig.deaths)]
    kinds = sorted({w.kind for w in windows})
    empty = {
        "times": 0,
        "pods": set(),
        "lost": 0,
        "orphaned": 0,
        "duplicated": 0,
        "miscounted": 0,
        "crashes": 0,
    }
    rows = {k: copy.deepcopy(empty) for k in [*kinds, "churn only"]}
    for window in windows:
        row = rows[window.kind]
        row["times"] += 1
        end = window.ended + AFTER_EFFECT_SECONDS
        row["pods"] |= {
            u for u, t in rig.pods.items() if t.first_seen <= end and t.last_seen >= window.started
        }

    def attribute(at: float) -> str:
        hit = [w for w in windows if w.started <= at <= w.ended + AFTER_EFFECT_SECONDS]
        return hit[-1].kind if hit else "churn only"

    for column, findings in (
        ("lost", report.lost),
        ("orphaned", report.orphans),
        ("duplicated", report.duplicates),
        ("miscounted", report.miscounted),
        ("crashes", report.loop_crashes),
    ):
        for finding in findings:
            rows[attribute(finding.at)][column] += 1
    rows["churn only"]["pods"] = set(rig.pods)
    rows["churn only"]["times"] = sum(rig.churn.values())
    width = max(len("fault"), *(len(kind) for kind in rows))
    header = (
        f"{'fault':<{width}} {'injected':>8} {'pods':>5} {'lost':>5} {'orphaned':>8} {'duplicated':>10} "
        f"{'miscounted':>10} {'loop crashes':>12}"
    )
    lines = [header, "-" * len(header)]
    for kind, row in rows.items():
        lines.append(
            f"{kind:<{width}} {row['times']:>8} {len(row['pods']):>5} {row['lost']:>5} "
            f"{row['orphaned']:>8} {row['duplicated']:>10} {row['miscounted']:>10} {row['crashes']:>12}"
        )
    churn = ", ".join(f"{k} {v}" for k, v in sorted(rig.churn.items()))
    lines.append(f"(churn only: all pods of the run; injected = churn actions: {churn})")
    return "\n".join(lines)
