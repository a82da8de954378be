"""Pod status from provider status: the only place a ``DeploymentStatus`` becomes a ``PodStatus``.

The kubelet always fills containerStatuses, hostIP, podIP, startTime and the four standard
conditions; tools (``kubectl get``, Deployments' availability, Services' endpoints) rely on
them, so we do too. Transition times are kept when a condition's status does not change, so
writing the same status twice is a no-op that ``needs_write`` can detect. A finished pod's
containers are always ``terminated`` and a pod waiting for placement or for a ConfigMap/Secret
shows the reason as its containers' ``waiting`` reason, because that is what ``kubectl get pods``
prints in the STATUS column.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from vkprovider.models import ContainerState, ContainerStatus, DeploymentStatus, Phase
from vkprovider.traffic.route import CONDITION_ROUTE

JSON = dict[str, Any]
CONDITION_TYPES = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
#: Our own pod condition: the pod's provider API is (un)reachable (DESIGN §4.2, issue 16).
PROVIDER_REACHABLE = "vkprovider.io/ProviderReachable"
OWN_CONDITIONS = frozenset((*CONDITION_TYPES, PROVIDER_REACHABLE, CONDITION_ROUTE))
TERMINAL_PHASES = (Phase.SUCCEEDED.value, Phase.FAILED.value)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ts(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _terminated(cs: ContainerStatus) -> JSON:
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


def _ended(cs: ContainerStatus | None, phase: str, reason: str, message: str) -> JSON:
    """A container of a finished pod that the provider did not report as exited.

    Like the kubelet (``ContainerStatusUnknown``, exit code 137), a finished pod never shows a
    container still waiting or running; the reason is the pod's, so ``kubectl get`` names it.
    """
    if phase == Phase.SUCCEEDED.value:
        terminated: JSON = {"exitCode": 0, "reason": reason or "Completed"}
    else:
        terminated = {"exitCode": 137, "reason": reason or "Error"}
    if message:
        terminated["message"] = message
    if cs is not None and cs.started_at:
        terminated["startedAt"] = _ts(cs.started_at)
    terminated["finishedAt"] = now_rfc3339()
    return {"terminated": terminated}


def _container_state(
    cs: ContainerStatus | None, waiting_default: tuple[str, str], phase: str, reason: str, message: str
) -> JSON:
    if cs is not None and cs.state is ContainerState.TERMINATED:
        return _terminated(cs)
    if phase in TERMINAL_PHASES:
        return _ended(cs, phase, reason, message)
    if cs is None or cs.state is ContainerState.WAITING:
        waiting: JSON = {"reason": (cs.reason if cs else "") or waiting_default[0]}
        detail = (cs.message if cs else "") or waiting_default[1]
        if detail:
            waiting["message"] = detail
        return {"waiting": waiting}
    return {"running": {"startedAt": _ts(cs.started_at) or now_rfc3339()}}


def container_statuses(
    pod: JSON,
    deployment: DeploymentStatus | None,
    *,
    provider: str,
    restarts: int = 0,
    phase: str = "",
    reason: str = "",
    message: str = "",
    waiting: tuple[str, str] | None = None,
) -> list[JSON]:
    """One status per spec container. ``waiting`` is the (reason, message) a container shows
    while nothing is deployed (placement pending, a missing ConfigMap/Secret), which is what
    ``kubectl get pods`` prints in its STATUS column."""
    by_name = {c.name: c for c in deployment.containers} if deployment else {}
    if waiting is None:
        waiting = ("ContainerCreating", "") if deployment else ("ProviderPending", "")
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
        state = _container_state(cs, waiting, phase, reason, message)
        running = "running" in state
        status: JSON = {
            "name": name,
            "image": spec.get("image", ""),
            "imageID": "",
            "containerID": f"vkprovider://{provider}/{provider_id}/{name}",
            "ready": bool(running and cs and cs.ready),
            "started": running,
            "restartCount": max(restarts, cs.restart_count if cs else 0),
            "state": state,
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


def reachability_condition(existing: dict[str, JSON], provider: str, reachable: bool) -> JSON:
    """``vkprovider.io/ProviderReachable``: False while the pod's provider API cannot be reached."""
    cond = _condition(existing, PROVIDER_REACHABLE, reachable)
    if reachable:
        cond["reason"] = "ProviderReachable"
        cond["message"] = f"provider {provider} answers again"
    else:
        cond["reason"] = "ProviderUnreachable"
        cond["message"] = (
            f"the API of provider {provider} cannot be reached; the pod shows its last observed "
            "status (the workload itself may well be running)"
        )
    return cond


def route_condition(existing: dict[str, JSON], ok: bool, reason: str, message: str) -> JSON:
    """``vkprovider.io/ServiceRoute``: whether the replica is published as a Service endpoint
    (reason and message in both states: *where* it is published matters as much as why not)."""
    cond = _condition(existing, CONDITION_ROUTE, ok)
    cond["reason"] = reason
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
    waiting: tuple[str, str] | None = None,
    reachable: bool | None = None,
    hide_pod_ip: bool = False,
    route: tuple[bool, str, str] | None = None,
) -> JSON:
    """The full pod status for ``deployment`` (None: nothing deployed yet).

    Conditions other writers own (``DisruptionTarget``, readiness gates …) are carried over
    unchanged: the status is written as a merge patch guarded by resourceVersion, so the list we
    send replaces the stored one and must contain them. ``reachable`` None keeps our
    ``ProviderReachable`` condition as it is (or absent). ``hide_pod_ip`` leaves ``podIP``
    empty (and clears one shown before), so the cluster's EndpointSlice controller skips the pod
    (docs/virtual-node.md, *Services and traffic*); ``route`` (ok, reason, message) sets the
    ``ServiceRoute`` condition, None keeps it as it is.
    """
    current = pod.get("status") or {}
    existing = {c["type"]: c for c in current.get("conditions") or []}
    phase = phase or (deployment.phase.value if deployment else Phase.PENDING.value)
    if phase == Phase.UNKNOWN.value:
        phase = current.get("phase") or Phase.PENDING.value
    if phase == Phase.PENDING.value and current.get("phase") == Phase.RUNNING.value:
        # A redeploy (restartPolicy) provisions again: like the kubelet with a restarting
        # container, the pod stays Running with its container waiting; never back to Pending.
        phase = Phase.RUNNING.value
    containers = container_statuses(
        pod,
        deployment,
        provider=provider,
        restarts=restarts,
        phase=phase,
        reason=reason,
        message=message,
        waiting=waiting,
    )
    running = phase == Phase.RUNNING.value
    ready = running and bool(deployment and deployment.ready) and all(c["ready"] for c in containers)
    not_ready_reason = "ContainersNotReady" if phase in ("Pending", "Running") else "PodCompleted"
    pod_ip = "" if hide_pod_ip else (deployment.ip if deployment else None) or current.get("podIP") or ""
    conditions = [
        _condition(existing, "PodScheduled", True),
        _condition(existing, "Initialized", True),
        _condition(existing, "ContainersReady", ready, not_ready_reason),
        _condition(existing, "Ready", ready, not_ready_reason),
    ]
    if reachable is not None:
        conditions.append(reachability_condition(existing, provider, reachable))
    elif PROVIDER_REACHABLE in existing:
        conditions.append(existing[PROVIDER_REACHABLE])
    if route is not None:
        conditions.append(route_condition(existing, *route))
    elif CONDITION_ROUTE in existing:
        conditions.append(existing[CONDITION_ROUTE])
    conditions += [c for c in current.get("conditions") or [] if c.get("type") not in OWN_CONDITIONS]
    status: JSON = {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": current.get("startTime")
        or _ts(deployment.started_at if deployment else None)
        or now_rfc3339(),
        "conditions": conditions,
        "containerStatuses": containers,
        "reason": reason or None,
        "message": message or None,
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    elif hide_pod_ip:
        status["podIP"] = None  # merge patch: removes an IP an earlier version (or write) showed
        status["podIPs"] = None
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
