"""Reading a pod object: what it shows, what it asks placement for, which changes matter."""

from __future__ import annotations

from vkprovider.kube.client import JSON
from vkprovider.placement import PodContext
from vkprovider.translate import SERVICE_ANNOTATIONS


def placement_context(pod: JSON, current: str | None = None) -> PodContext:
    meta = pod["metadata"]
    owners = meta.get("ownerReferences") or []
    workload = next((o["uid"] for o in owners if o.get("controller")), None)
    return PodContext(
        namespace=meta["namespace"],
        annotations=dict(meta.get("annotations") or {}),
        workload=workload,
        current_provider=current,
    )


def pod_once_ran(pod: JSON) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" or any(
        "running" in (c.get("state") or {}) or "terminated" in (c.get("state") or {})
        for c in status.get("containerStatuses") or []
    )


def shown_restarts(pod: JSON) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(c.get("restartCount") or 0) for c in statuses), default=0)


def _relevant_annotations(meta: JSON) -> dict[str, str]:
    return {k: v for k, v in (meta.get("annotations") or {}).items() if k not in SERVICE_ANNOTATIONS}


def is_relevant_change(old: JSON | None, new: JSON) -> bool:
    """Re-sync on spec, label, annotation or deletion changes; ignore status-only updates and
    the annotations the service writes itself (re-queuing on those would cancel a backoff)."""
    if old is None:
        return True
    om, nm = old["metadata"], new["metadata"]
    if om.get("uid") != nm.get("uid"):
        return True
    keys: tuple[str, ...] = ("labels", "deletionTimestamp", "generation")
    if any(om.get(k) != nm.get(k) for k in keys):
        return True
    if _relevant_annotations(om) != _relevant_annotations(nm):
        return True
    return bool(old.get("spec") != new.get("spec"))
