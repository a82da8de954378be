"""Remote Pod / Node JSON → DeploymentStatus and Offers.

The remote pod's status is already Kubernetes-shaped, so mapping is close to one-to-one; the
identity (uid, node) comes from our annotations, not from labels that may hold hashes.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from typing import Any

from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    LABEL_POD_UID,
    ContainerState,
    ContainerStatus,
    DeploymentStatus,
    Offer,
    Phase,
    gpu_memory_gb,
    normalize_gpu,
)

from .manifest import ANNOTATION_OFFER
from .settings import KubernetesSettings

log = logging.getLogger(__name__)

_PHASES = {p.value: p for p in Phase}


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def identity(pod: dict[str, Any]) -> tuple[str, str] | None:
    """``(uid, node)`` from our annotations, or ``None`` if the pod is not ours."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    uid, node = annotations.get(LABEL_POD_UID), annotations.get(LABEL_NODE_NAME)
    if isinstance(uid, str) and isinstance(node, str):
        return uid, node
    return None


def _container_status(raw: dict[str, Any]) -> ContainerStatus:
    state = raw.get("state") or {}
    common = {
        "name": str(raw.get("name", "")),
        "ready": bool(raw.get("ready")),
        "restart_count": int(raw.get("restartCount") or 0),
        "image": str(raw.get("image", "")),
    }
    if "running" in state:
        return ContainerStatus(
            state=ContainerState.RUNNING,
            started_at=_time((state["running"] or {}).get("startedAt")),
            **common,
        )
    if "terminated" in state:
        t = state["terminated"] or {}
        return ContainerStatus(
            state=ContainerState.TERMINATED,
            reason=str(t.get("reason") or ""),
            message=str(t.get("message") or ""),
            exit_code=t.get("exitCode"),
            started_at=_time(t.get("startedAt")),
            finished_at=_time(t.get("finishedAt")),
            **common,
        )
    w = state.get("waiting") or {}
    return ContainerStatus(
        state=ContainerState.WAITING,
        reason=str(w.get("reason") or ""),
        message=str(w.get("message") or ""),
        **common,
    )


def status_from_pod(provider: str, pod: dict[str, Any]) -> DeploymentStatus:
    """The remote pod's status as a ``DeploymentStatus`` (unknown phases → Unknown, logged)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    uid, node = identity(pod) or ("", "")
    raw_phase = status.get("phase") or "Pending"
    phase = _PHASES.get(raw_phase)
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "")
    if phase is None:
        log.warning("provider %s: pod %s has unknown phase %r", provider, meta.get("name"), raw_phase)
        phase, reason = Phase.UNKNOWN, reason or "UnknownProviderState"
    if meta.get("deletionTimestamp") and phase is not Phase.SUCCEEDED:
        # a pod being deleted never runs again: report it terminal so nobody waits on it
        phase, reason = Phase.FAILED, "Terminating"
        message = message or "the remote pod is being deleted"
    containers = [_container_status(c) for c in status.get("containerStatuses") or []]
    if phase is Phase.PENDING and not reason:
        waiting = next((c for c in containers if c.state is ContainerState.WAITING and c.reason), None)
        unscheduled = next(
            (
                c
                for c in status.get("conditions") or []
                if c.get("type") == "PodScheduled" and c.get("status") == "False"
            ),
            None,
        )
        if waiting is not None:
            reason, message = waiting.reason, waiting.message
        elif unscheduled is not None:
            reason, message = (
                str(unscheduled.get("reason") or "Unschedulable"),
                str(unscheduled.get("message") or ""),
            )
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return DeploymentStatus(
        uid=uid,
        phase=phase,
        ready=ready and phase is Phase.RUNNING,
        node_name=node,
        provider_id=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        offer_id=str((meta.get("annotations") or {}).get(ANNOTATION_OFFER, "")),
        ip=status.get("podIP") or None,
        reason=reason,
        message=message,
        started_at=_time(status.get("startTime")),
        containers=containers,
    )


def _quantity(value: Any) -> int:
    """Integer quantities only (GPUs are whole); anything else counts as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def offers_from_nodes(
    provider: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], settings: KubernetesSettings
) -> list[Offer]:
    """Per (GPU label value, count): capacity = sum over ready nodes of free GPUs // count."""
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in (pod.get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            used[node] += max(
                _quantity((res.get("limits") or {}).get(settings.gpu_resource)),
                _quantity((res.get("requests") or {}).get(settings.gpu_resource)),
            )
    free_by_type: dict[str, list[tuple[int, int]]] = defaultdict(list)  # label → [(free, allocatable)]
    for node in nodes:
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if spec.get("unschedulable") or not ready:
            continue
        allocatable = _quantity((status.get("allocatable") or {}).get(settings.gpu_resource))
        if allocatable <= 0:
            continue
        raw = str((meta.get("labels") or {}).get(settings.gpu_type_label, ""))
        if not raw and not settings.default_gpu_type:
            continue
        free_by_type[raw].append((max(0, allocatable - used.get(meta.get("name", ""), 0)), allocatable))
    offers: list[Offer] = []
    for raw, shapes in sorted(free_by_type.items()):
        gpu_type = normalize_gpu(raw) if raw else settings.default_gpu_type
        for count in sorted(set(settings.gpu_counts)):
            if count < 1 or not any(allocatable >= count for _, allocatable in shapes):
                continue
            offers.append(
                Offer(
                    provider=provider,
                    offer_id=f"{raw}/{count}",
                    gpu_type=gpu_type,
                    gpu_count=count,
                    gpu_memory_gb=gpu_memory_gb(gpu_type),
                    region=settings.region,
                    price_per_hour=settings.price_per_gpu_hour * count,
                    capacity=sum(free // count for free, _ in shapes),
                )
            )
    return offers
