"""Kueue's pending gangs that will be admitted next: capacity the return wave must not hand out.

A Job Kueue has not admitted yet is suspended, so its pods do not exist and the wave's
snapshot cannot see them; once the queue has room, Kueue admits it, the Job's pods are created
and the scheduler preempts whatever came home into their GPUs (the replicas go straight back to
the cloud). So before any external replica is planned, the wave reserves the gangs Kueue will
admit next, as *phantom pods* built from their podSet templates.

Two kinds of gang hold capacity the snapshot does not show:

* **on its way**: quota already reserved (``QuotaReserved`` or ``Admitted``, not Finished) but
  no live pod of its owner yet — the Job is being unsuspended, or admission checks are still
  pending. Its quota is in the queue's usage already, so it is reserved without a room check.
  Once any of its pods exists, the planner sees the pods themselves (bound, nominated, or
  ungated and unbound) and the gang is no longer reserved here.
* **admitted next**: read the way Kueue's queue manager does it, per ClusterQueue, kept simple
  and conservative:

* a Workload is pending when it is active, not Finished, and has neither ``QuotaReserved`` nor
  ``Admitted``; it belongs to the ClusterQueue its LocalQueue (``spec.queueName``) points to;
* a held queue (``spec.stopPolicy`` set on the ClusterQueue or the LocalQueue) or a
  ClusterQueue that is not ``Active`` admits nothing;
* pending workloads in priority order (``spec.priority`` descending, then creation) take the
  queue's room: per flavor and GPU resource, ``nominalQuota`` minus what the queue uses
  (the larger of ``status.flavorsReservation`` and ``status.flavorsUsage``) minus what the
  workloads before it took; the first flavor of a resource group covering its GPU resources
  that has room for its whole demand (count x per-pod requests of every podSet) is taken;
* a workload that does not fit ends the queue's round under ``StrictFIFO``; under
  ``BestEffortFIFO`` (Kueue's default) the next one is tried.

Borrowing from a cohort and preemption by Kueue are not modelled (a gang that could only be
admitted by borrowing is not reserved). Only GPU resources (``*/gpu``) size the demand: the
return competes for GPUs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vkprovider.gate.podspec import pod_requests
from vkprovider.translate.quantity import parse_quantity

JSON = Mapping[str, Any]
HOLD_POLICIES = ("Hold", "HoldAndDrain")


@dataclass(frozen=True)
class Gang:
    """One pending Workload Kueue would admit next, and the pods it will create."""

    workload: str  #: namespace/name
    cluster_queue: str
    flavor: str  #: '' for a gang on its way (Kueue chose the flavor already)
    pods: list[dict[str, Any]]  #: phantom pods, one per replica of every podSet


def _true(obj: JSON, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def holds_quota(workload: JSON) -> bool:
    """Quota reserved or admitted, not finished: its pods come (or are there already)."""
    if _true(workload, "Finished") or (workload.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return _true(workload, "QuotaReserved") or _true(workload, "Admitted")


def is_pending(workload: JSON) -> bool:
    """Waiting for quota: active, not finished, no quota reserved and not admitted."""
    if (workload.get("spec") or {}).get("active") is False:
        return False
    if (workload.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return not any(_true(workload, kind) for kind in ("Finished", "QuotaReserved", "Admitted"))


def _quantity(raw: object, resource: str) -> Decimal:
    try:
        return parse_quantity(str(raw), resource)
    except Exception:
        return Decimal(0)


def _gpus(resources: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {name: amount for name, amount in resources.items() if name.endswith("/gpu") and amount > 0}


def phantoms(workload: JSON) -> list[dict[str, Any]]:
    """The pods the workload's podSets will create: each template ``count`` times, unbound.
    Volumes are dropped: a reservation needs the requests and the placement rules, and a
    claim the fit engine cannot judge must not make a gang reserve nothing."""
    meta = workload.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    out: list[dict[str, Any]] = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        template = pod_set.get("template") or {}
        spec = copy.deepcopy(dict(template.get("spec") or {}))
        spec.pop("nodeName", None)
        spec.pop("volumes", None)
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        for i in range(int(pod_set.get("count") or 0)):
            pod_name = f"{name}-{pod_set.get('name', 'main')}-{i}"
            out.append(
                {
                    "metadata": {
                        "name": pod_name,
                        "namespace": namespace,
                        "uid": f"kueue-gang/{namespace}/{pod_name}",
                        "labels": labels,
                    },
                    "spec": spec,
                }
            )
    return out


def demand(pods: Iterable[JSON]) -> dict[str, Decimal]:
    """The GPUs of every kind the pods request together."""
    total: dict[str, Decimal] = {}
    for pod in pods:
        for name, amount in _gpus(pod_requests(pod)).items():
            total[name] = total.get(name, Decimal(0)) + amount
    return total


def room(cq: JSON) -> dict[tuple[str, str], Decimal]:
    """(flavor, resource) -> nominal quota minus what the queue holds (never below 0)."""
    nominal: dict[tuple[str, str], Decimal] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                key = (str(flavor.get("name", "")), str(res.get("name", "")))
                nominal[key] = _quantity(res.get("nominalQuota", 0), key[1])
    used: dict[tuple[str, str], Decimal] = {}
    status = cq.get("status") or {}
    for field in ("flavorsReservation", "flavorsUsage"):
        for flavor in status.get(field) or []:
            for res in flavor.get("resources") or []:
                key = (str(flavor.get("name", "")), str(res.get("name", "")))
                used[key] = max(used.get(key, Decimal(0)), _quantity(res.get("total", 0), key[1]))
    return {key: max(Decimal(0), amount - used.get(key, Decimal(0))) for key, amount in nominal.items()}


def _flavor_for(cq: JSON, want: Mapping[str, Decimal], left: Mapping[tuple[str, str], Decimal]) -> str:
    """The first flavor (in the queue's order) of a resource group covering every wanted
    resource that has room for all of it; '' if none."""
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        if not set(want) <= set(group.get("coveredResources") or []):
            continue
        for flavor in group.get("flavors") or []:
            name = str(flavor.get("name", ""))
            if all((name, r) in left and left[(name, r)] >= amount for r, amount in want.items()):
                return name
    return ""


def _order(workload: JSON) -> tuple[int, str, str]:
    meta = workload.get("metadata") or {}
    priority = (workload.get("spec") or {}).get("priority")
    return (
        -int(priority or 0),
        str(meta.get("creationTimestamp", "")),
        f"{meta.get('namespace', '')}/{meta.get('name', '')}",
    )


def _key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _admission_queue(workload: JSON) -> str:
    return str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def admitted_next(
    workloads: Iterable[JSON],
    cluster_queues: Mapping[str, JSON],
    local_queues: Mapping[str, JSON],
    live_owners: set[str] | frozenset[str] = frozenset(),
) -> list[Gang]:
    """The gangs on their way and the pending gangs each ClusterQueue has room for now (see
    the module docstring). ``cluster_queues``: name -> ClusterQueue; ``local_queues``:
    ``namespace/name`` -> LocalQueue; ``live_owners``: the UIDs of every live pod and of its
    owners (a gang with a pod already is seen by its pods)."""
    queued: dict[str, list[JSON]] = {}
    gangs: list[Gang] = []
    for workload in workloads:
        meta, spec = workload.get("metadata") or {}, workload.get("spec") or {}
        if holds_quota(workload):
            owners = {str(ref.get("uid", "")) for ref in meta.get("ownerReferences") or []}
            if owners & live_owners:
                continue  # most admitted workloads: running, their pods in the snapshot
            if (pods := phantoms(workload)) and demand(pods):
                gangs.append(Gang(_key(workload), _admission_queue(workload), "", pods))
            continue
        if not is_pending(workload):
            continue
        local = local_queues.get(f"{meta.get('namespace', '')}/{spec.get('queueName', '')}")
        local_spec = (local or {}).get("spec") or {}
        cq_name = str(local_spec.get("clusterQueue") or "")
        if cq_name in cluster_queues and local_spec.get("stopPolicy") not in HOLD_POLICIES:
            queued.setdefault(cq_name, []).append(workload)
    for cq_name, pending in sorted(queued.items()):
        cq = cluster_queues[cq_name]
        cq_spec = cq.get("spec") or {}
        if cq_spec.get("stopPolicy") in HOLD_POLICIES or not _true(cq, "Active"):
            continue
        strict = cq_spec.get("queueingStrategy") == "StrictFIFO"
        left = room(cq)
        for workload in sorted(pending, key=_order):
            pods = phantoms(workload)
            want = demand(pods)
            if not want:
                continue  # no GPUs: it does not compete with the replicas
            flavor = _flavor_for(cq, want, left)
            if not flavor:
                if strict:
                    break
                continue
            for resource, amount in want.items():
                left[(flavor, resource)] -= amount
            gangs.append(Gang(_key(workload), cq_name, flavor, pods))
    return gangs
