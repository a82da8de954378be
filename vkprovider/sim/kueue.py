"""Training through real Kueue in a simulated day (scenario ``training: {via: kueue}``).

The objects are deploy/kueue's own (ResourceFlavor ``local-gpu``, ClusterQueue ``training``,
LocalQueue ``research``, the WorkloadPriorityClasses), read from its kustomization and applied
before ``vkprovider serve`` starts, because the service's quota sync refuses to start without
its ClusterQueue. The pure functions here turn what the apiserver shows (Jobs, Workloads, pods)
into each training Job's admission record: created, admitted, first pod, finished.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from vkprovider.sim.record import Admission

JSON = dict[str, Any]

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy" / "kueue"
NAMESPACE = "research"  #: deploy/kueue's LocalQueue lives here; training Jobs are created here
LOCAL_QUEUE = "research"
CLUSTER_QUEUE = "training"
FLAVOR = "local-gpu"
WORKLOAD_PRIORITY_CLASS = "training-high"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
API = "/apis/kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"


def deploy_objects(directory: Path = DEPLOY_DIR) -> list[JSON]:
    """Every object deploy/kueue's kustomization lists, in its order."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    objects: list[JSON] = []
    for resource in kustomization["resources"]:
        objects += [doc for doc in yaml.safe_load_all((directory / resource).read_text()) if doc]
    return objects


def timestamp(value: str | None) -> float | None:
    """An apiserver RFC 3339 time (second resolution) as unix seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _condition(obj: JSON, kind: str) -> JSON | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def workload_state(workload: JSON | None) -> str:
    """``queued`` (no quota yet), ``admitted`` or ``finished``."""
    if workload is None:
        return "queued"
    if _condition(workload, "Finished"):
        return "finished"
    if _condition(workload, "Admitted"):
        return "admitted"
    return "queued"


def owner_job(workload: JSON) -> str | None:
    for ref in workload["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return str(ref["name"])
    return None


def queue_gpus(cluster_queue: JSON | None, flavor: str = FLAVOR) -> int | None:
    """The ClusterQueue's GPU ``nominalQuota`` for the local flavor (what the quota sync keeps)."""
    for group in ((cluster_queue or {}).get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            if entry.get("name") == flavor:
                for res in entry.get("resources") or []:
                    if res.get("name") == GPU:
                        return int(res.get("nominalQuota") or 0)
    return None


def update(
    admissions: dict[str, Admission], jobs: list[JSON], workloads: list[JSON], pods: list[JSON], label: str
) -> None:
    """Fold one reading into the records: the earliest time seen for each step stays (a Job
    deleted later keeps its record)."""
    by_job = {name: w for w in workloads if (name := owner_job(w))}
    for job in jobs:
        name = (job["metadata"].get("labels") or {}).get(label)
        if name not in admissions:
            continue
        a = admissions[name]
        a.created = a.created or timestamp(job["metadata"].get("creationTimestamp"))
        wl = by_job.get(job["metadata"]["name"])
        if wl is not None:
            admitted, finished = _condition(wl, "Admitted"), _condition(wl, "Finished")
            if admitted and a.admitted is None:
                a.admitted = timestamp(admitted.get("lastTransitionTime"))
            if finished and a.finished is None:
                a.finished = timestamp(finished.get("lastTransitionTime"))
    for pod in pods:
        name = (pod["metadata"].get("labels") or {}).get(label)
        if name in admissions:
            created = timestamp(pod["metadata"].get("creationTimestamp"))
            a = admissions[name]
            if created is not None and (a.first_pod is None or created < a.first_pod):
                a.first_pod = created
