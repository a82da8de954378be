"""Kubelet-style node conditions, with the transition-time bookkeeping the API expects.

``lastTransitionTime`` must only move when a condition's status flips; ``lastHeartbeatTime``
moves on every write. The node-lifecycle controller watches Ready's heartbeat (and the Lease):
a heartbeat that stops moving is how it learns the node is gone, so heartbeats are only written
when the node really is alive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

READY = "Ready"
#: Condition types this agent writes; any other type on the node belongs to another writer.
OWNED_TYPES = (READY, "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")

_HEALTHY: dict[str, tuple[str, str, str]] = {  # type -> (status, reason, message), as the kubelet says
    READY: ("True", "KubeletReady", "kubelet is posting ready status"),
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "NetworkUnavailable": ("False", "RouteCreated", "RouteController created a route"),
}
NOT_READY_REASON = "ProvidersUnreachable"


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
    ready: bool, not_ready_message: str, now: datetime, previous: Sequence[dict[str, Any]] = ()
) -> list[Condition]:
    """Our five conditions at ``now``; a condition whose status did not change keeps the
    ``lastTransitionTime`` found in ``previous`` (the node's current conditions)."""
    before = {c.get("type"): c for c in previous}
    out: list[Condition] = []
    for kind in OWNED_TYPES:
        status, reason, message = _HEALTHY[kind]
        if kind == READY and not ready:
            status, reason = "False", NOT_READY_REASON
            message = not_ready_message or "every provider's probe failed"
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
