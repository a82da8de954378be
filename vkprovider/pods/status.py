"""Pod status from provider status: the only place a ``DeploymentStatus`` becomes a ``PodStatus``.

The kubelet always fills containerStatuses, hostIP, podIP, startTime and the four standard
conditions; tools (``kubectl get``, Deployments' availability, Services' endpoints) rely on
them, so we do too. Transition times are kept when a condition's status does not change, so
writing the same status twice is a no-op that ``needs_write`` can detect.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from vkprovider.models import ContainerState, ContainerStatus, DeploymentStatus, Phase

JSON = dict[str, Any]
CONDITION_TYPES = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ts(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _container_state(cs: ContainerStatus | None, pending_reason: str) -> JSON:
    if cs is None or cs.state is ContainerState.WAITING:
        reason = (cs.reason if cs else "") or pending_reason
        waiting: JSON = {"reason": reason}
        if cs and cs.message:
            waiting["message"] = cs.message
        return {"waiting": waiting}
    if cs.state is ContainerState.RUNNING:
        return {"running": {"startedAt": _ts(cs.started_at) or now_rfc3339()}}
    terminated: JSON = {
        "exitCode": cs.exit_code if cs.exit_code is not None else 0,
        "reason": cs.reason or ("Completed" if not cs.exit_code else "Error"),
    }
    if cs.message:
        terminated["message"] = cs.message
    if cs.started_at:
        terminated["startedAt"] = _ts(cs.started_at)
    terminated["finishedAt"] = _ts(cs.finished_at) or now_rfc3339()
    return {"terminated": terminated}


def container_statuses(
    pod: JSON, deployment: DeploymentStatus | None, *, provider: str, restarts: int = 0
) -> list[JSON]:
    by_name = {c.name: c for c in deployment.containers} if deployment else {}
    pending_reason = "ContainerCreating" if deployment else "ProviderPending"
    result = []
    for spec in pod["spec"].get("containers", []):
        name = spec["name"]
        cs = by_name.get(name)
        if cs is None and deployment is not None and deployment.phase is Phase.RUNNING:
            # Provider reports the workload, not per-container detail: mirror the deployment.
            cs = ContainerStatus(
                name=name,
                state=ContainerState.RUNNING,
                ready=deployment.ready,
                started_at=deployment.started_at,
            )
        provider_id = deployment.provider_id if deployment and deployment.provider_id else "pending"
        status: JSON = {
            "name": name,
            "image": spec.get("image", ""),
            "imageID": "",
            "containerID": f"vkprovider://{provider}/{provider_id}/{name}",
            "ready": bool(cs and cs.ready and cs.state is ContainerState.RUNNING),
            "started": bool(cs and cs.state is ContainerState.RUNNING),
            "restartCount": max(restarts, cs.restart_count if cs else 0),
            "state": _container_state(cs, pending_reason),
        }
        result.append(status)
    return result


def _condition(existing: dict[str, JSON], kind: str, ok: bool, reason: str = "", message: str = "") -> JSON:
    status = "True" if ok else "False"
    previous = existing.get(kind)
    transition = (
        previous.get("lastTransitionTime")
        if previous and previous.get("status") == status and previous.get("lastTransitionTime")
        else now_rfc3339()
    )
    cond: JSON = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": transition}
    if reason and not ok:
        cond["reason"] = reason
    if message and not ok:
        cond["message"] = message
    return cond


def build_status(
    pod: JSON,
    deployment: DeploymentStatus | None,
    *,
    provider: str,
    host_ip: str,
    phase: str | None = None,
    reason: str = "",
    message: str = "",
    restarts: int = 0,
) -> JSON:
    """The full pod status for ``deployment`` (None: nothing deployed yet)."""
    current = pod.get("status") or {}
    existing = {c["type"]: c for c in current.get("conditions") or []}
    phase = phase or (deployment.phase.value if deployment else Phase.PENDING.value)
    if phase == Phase.UNKNOWN.value:
        phase = current.get("phase") or Phase.PENDING.value
    containers = container_statuses(pod, deployment, provider=provider, restarts=restarts)
    running = phase == Phase.RUNNING.value
    ready = running and bool(deployment and deployment.ready) and all(c["ready"] for c in containers)
    not_ready_reason = "ContainersNotReady" if phase in ("Pending", "Running") else "PodCompleted"
    pod_ip = (deployment.ip if deployment else None) or current.get("podIP") or ""
    status: JSON = {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": current.get("startTime")
        or _ts(deployment.started_at if deployment else None)
        or now_rfc3339(),
        "conditions": [
            _condition(existing, "PodScheduled", True),
            _condition(existing, "Initialized", True),
            _condition(existing, "ContainersReady", ready, not_ready_reason),
            _condition(existing, "Ready", ready, not_ready_reason),
        ],
        "containerStatuses": containers,
        "reason": reason or None,
        "message": message or None,
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    return status


def _container_key(container: JSON) -> tuple[Any, ...]:
    state: JSON = container.get("state") or {}
    detail: JSON = next(iter(state.values()), {}) or {}
    return (
        container.get("name"),
        container.get("ready"),
        container.get("restartCount"),
        sorted(state),
        detail.get("reason"),
        detail.get("exitCode"),
    )


def _comparable(status: JSON) -> tuple[Any, ...]:
    conditions = sorted(
        (c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []
    )
    return (
        status.get("phase"),
        status.get("podIP") or "",
        status.get("hostIP") or "",
        status.get("reason") or "",
        status.get("message") or "",
        conditions,
        [_container_key(c) for c in status.get("containerStatuses") or []],
    )


def needs_write(pod: JSON, desired: JSON) -> bool:
    """False when the pod already shows ``desired`` (ignoring timestamps): skip duplicate writes."""
    return bool(_comparable(pod.get("status") or {}) != _comparable(desired))
