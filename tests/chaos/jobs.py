"""Jobs in the churn (issue 22): Indexed and NonIndexed Jobs with a ``podFailurePolicy`` run to
completion on the virtual node while the churn interrupts their pods (graceful deletes of
Running pods, which keep the Job's tracking finalizer), and the invariant that **no interrupted
pod is ever counted as a Job completion**: every pod that showed ``Succeeded`` has a deployment
the cloud ended with exit 0 (ledger ``end_reason`` ``Completed``), and no Job counts more
successes than it has such pods.

Kept apart from ``rig.py``/``report.py`` (which only call in here) so other fault additions
merge cleanly.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING, Any

from vkprovider_fakecloud.ledger import LedgerEntry

from tests.support import gpu_worker_pod

if TYPE_CHECKING:
    from tests.chaos.report import Finding
    from tests.chaos.rig import Rig

JSON = dict[str, Any]
JOB_LABEL = "job-name"
MAX_ACTIVE = 2  #: Jobs running at once (each: parallelism 2), so capacity stays for the Deployments
COMPLETED = "Completed"  #: fakecloud's ledger end_reason for a run that ended with exit 0
#: the Job controller's pod-failure backoff cap (10 s doubling, at most 6 minutes): a Job whose
#: pods the churn interrupted often may create its next pod that long after the faults end
FINISH_WAIT = 360.0 + 60.0


def job_manifest(name: str, node: str, *, indexed: bool, run_seconds: float) -> JSON:
    """A GPU Job pinned to the virtual node; failures of disrupted pods (``DisruptionTarget``)
    are ignored, exit code 42 fails the Job (it never happens: a 42 would be a misreport)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": 3,
            "parallelism": 2,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "backoffLimit": 50,
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
                ]
            },
            "template": {"spec": gpu_worker_pod(node, run_seconds=run_seconds, grace_seconds=3)},
        },
    }


def finished(job: JSON) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


async def list_jobs(rig: Rig) -> list[JSON] | None:
    listed = await rig.kube("GET", f"/apis/batch/v1/namespaces/{rig.namespace}/jobs")
    return None if listed is None else list(listed["items"])


async def jobs_finished(rig: Rig) -> bool:
    jobs = await list_jobs(rig)
    return jobs is not None and all(finished(j) for j in jobs)


async def churn_jobs(rig: Rig, rng: random.Random, stop: asyncio.Event) -> None:
    """Start Jobs (alternately Indexed and NonIndexed, at most ``MAX_ACTIVE`` at once) and
    interrupt their Running pods with graceful deletes while they run."""
    created = 0
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(2.0, 5.0))
        jobs = await list_jobs(rig)
        if jobs is None:
            continue
        if sum(not finished(j) for j in jobs) < MAX_ACTIVE and rng.random() < 0.6:
            name = f"job-{created}"
            body = job_manifest(name, rig.node, indexed=created % 2 == 0, run_seconds=rng.uniform(4.0, 9.0))
            await rig.kube("POST", f"/apis/batch/v1/namespaces/{rig.namespace}/jobs", body)
            created += 1
            rig.churn["job"] = rig.churn.get("job", 0) + 1
            continue
        pods = await rig.list_pods() or []
        running = sorted(
            p["metadata"]["name"]
            for p in pods
            if JOB_LABEL in (p["metadata"].get("labels") or {})
            and not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") == "Running"
        )
        if running:
            name = running[rng.randrange(len(running))]
            await rig.kube("DELETE", f"/api/v1/namespaces/{rig.namespace}/pods/{name}")
            rig.churn["interrupt-job-pod"] = rig.churn.get("interrupt-job-pod", 0) + 1


async def miscounted_completions(rig: Rig, entries: list[LedgerEntry]) -> list[Finding]:
    """Pods shown ``Succeeded`` without a deployment that ended with exit 0, and Jobs counting
    more successes than they have such pods."""
    from tests.chaos.report import Finding

    completed = {e.uid for e in entries if e.end_reason == COMPLETED}
    found: list[Finding] = []
    for uid, trace in rig.pods.items():
        if trace.succeeded_at is not None and uid not in completed:
            ends = sorted({e.end_reason or "billing" for e in entries if e.uid == uid})
            found.append(
                Finding(
                    trace.succeeded_at,
                    f"{trace.name} ({uid[:8]}): Succeeded, but no cloud reported exit 0 (ledger: {ends})",
                )
            )
    for job in await list_jobs(rig) or []:
        name = job["metadata"]["name"]
        succeeded = int((job.get("status") or {}).get("succeeded") or 0)
        real = sum(1 for uid, t in rig.pods.items() if t.job == name and uid in completed)
        if succeeded > real:
            found.append(
                Finding(time.time(), f"Job {name}: counts {succeeded} completions, the clouds ran {real}")
            )
    return found
