"""Kubelet-style node conditions, with the transition-time bookkeeping the API expects.

``lastTransitionTime`` must only move when a condition's status flips; ``lastHeartbeatTime``
moves on every write.

``Ready`` means what the Lease means: *vkprovider is alive*. Provider reachability is a condition
of its own, ``ProvidersReachable`` (False naming the unreachable providers), because the
node-lifecycle controller answers a NotReady/Unknown node with ``unreachable:NoExecute`` and
evicts every pod — and an outage of a cloud's control API is not an outage of its workloads
(DESIGN §4.2; the Go library differs here on purpose, see docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

READY = "Ready"
PROVIDERS_REACHABLE = "ProvidersReachable"
#: Condition types this agent writes; any other type on the node belongs to another writer.
OWNED_TYPES = (
    READY,
    PROVIDERS_REACHABLE,
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
)

_HEALTHY: dict[str, tuple[str, str, str]] = {  # type -> (status, reason, message), as the kubelet says
    READY: ("True", "KubeletReady", "kubelet is posting ready status"),
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "NetworkUnavailable": ("False", "RouteCreated", "RouteController created a route"),
}
NOT_READY_REASON = "KubeletNotReady"
_MAX_MESSAGE = 1024


@dataclass(frozen=True)
class Reachability:
    """Which providers answered their last probe. Equality ignores the error texts, so a changing
    error message costs no extra write (it is refreshed with the next heartbeat)."""

    reachable: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()
    errors: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def configured(self) -> bool:
        return bool(self.reachable or self.unreachable)

    def condition(self) -> tuple[str, str, str]:
        """(status, reason, message) of ``ProvidersReachable``."""
        if not self.configured:
            return "False", "NoProviders", "no providers configured"
        if not self.unreachable:
            return (
                "True",
                "ProvidersReachable",
                f"every provider answers its probe: {', '.join(self.reachable)}",
            )
        errors = dict(self.errors)
        down = "; ".join(f"{name} ({errors.get(name) or 'probe failed'})" for name in self.unreachable)
        if not self.reachable:
            message = (
                f"every provider unreachable: {down}. Running pods are kept with their last status; "
                "no new placements (circuit breaker)"
            )
            return "False", "ProvidersUnreachable", message[:_MAX_MESSAGE]
        message = (
            f"unreachable: {down}; reachable: {', '.join(self.reachable)}. Pods on an unreachable "
            "provider keep running; new pods go to the reachable ones"
        )
        return "False", "ProviderUnreachable", message[:_MAX_MESSAGE]


def rfc3339(moment: datetime) -> str:
    """Second-precision UTC time, the format of ``metav1.Time``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    heartbeat: datetime
    transition: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastHeartbeatTime": rfc3339(self.heartbeat),
            "lastTransitionTime": rfc3339(self.transition),
        }


def _parse(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def build_conditions(
    ready: bool,
    not_ready_message: str,
    now: datetime,
    previous: Sequence[dict[str, Any]] = (),
    reachability: Reachability | None = None,
) -> list[Condition]:
    """Our conditions at ``now``; a condition whose status did not change keeps the
    ``lastTransitionTime`` found in ``previous`` (the node's current conditions).
    ``ProvidersReachable`` is included when ``reachability`` is given."""
    before = {c.get("type"): c for c in previous}
    out: list[Condition] = []
    for kind in OWNED_TYPES:
        if kind == PROVIDERS_REACHABLE:
            if reachability is None:
                continue
            status, reason, message = reachability.condition()
        else:
            status, reason, message = _HEALTHY[kind]
        if kind == READY and not ready:
            status, reason = "False", NOT_READY_REASON
            message = not_ready_message or "vkprovider is not ready"
        old = before.get(kind)
        transition = now
        if old is not None and old.get("status") == status:
            transition = _parse(old.get("lastTransitionTime")) or now
        out.append(Condition(kind, status, reason, message, now, transition))
    return out


def condition_status(conditions: Sequence[dict[str, Any]], kind: str) -> str | None:
    for cond in conditions:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None
