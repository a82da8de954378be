"""The contract between the capacity gate and the node agent, kept on the virtual Node itself.

The gate's taint must never outlive the gate: a taint nobody maintains keeps bursting off
after the next preemption. So each gate renews a heartbeat annotation on the node it taints,
and the node agent (alive whenever bursting is possible) removes the taint named there once
the heartbeat is older than its timeout. The same annotation names the one owner of the taint
(a second gate refuses while it is fresh) and carries the last flip, so the minimum flip
interval survives a new leadership term.

``vkprovider.io/gate-paused`` (any non-empty value) hands the taint to an operator: the gate
writes no taint and the node agent removes none.

This module is pure (JSON in, JSON out) and lives below both the gate and the node agent,
which must not import each other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

HEARTBEAT_ANNOTATION = "vkprovider.io/gate-heartbeat"
PAUSED_ANNOTATION = "vkprovider.io/gate-paused"
#: The gate's taint key when nothing else is configured (``gate.taint.key``).
DEFAULT_TAINT_KEY = "local-capacity"
#: Node label the node agent keeps: the most GPUs any one listed offer has, so the most one pod
#: can get there (the gate's Pending rule does not count a pod asking more).
MAX_GPUS_PER_POD_LABEL = "vkprovider.io/max-gpus-per-pod"


@dataclass(frozen=True)
class Heartbeat:
    """One gate's claim on a node's taint. Times are wall-clock Unix seconds (written as
    RFC 3339), because the reader is another process, possibly on another host."""

    owner: str  #: who writes the taint (leader-election Lease or host; ``gate.identity``)
    renew_time: float  #: when the owner last said it is alive
    timeout_seconds: float  #: older than this: the owner is gone
    taint_key: str  #: the taint the owner maintains (and the node agent removes when stale)
    last_flip: float | None = None  #: the last taint change (keeps ``min_flip_interval`` across terms)

    def age(self, now: float) -> float:
        return now - self.renew_time

    def stale(self, now: float) -> bool:
        return self.age(now) > self.timeout_seconds

    def to_annotation(self) -> str:
        data: dict[str, Any] = {k: v for k, v in asdict(self).items() if v is not None}
        data["renew_time"] = _stamp(self.renew_time)
        if self.last_flip is not None:
            data["last_flip"] = _stamp(self.last_flip)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _moment(text: object) -> float:
    if not isinstance(text, str):
        raise ValueError(f"expected an RFC 3339 time, got {text!r}")
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def node_annotations(node: Mapping[str, Any] | None) -> Mapping[str, str]:
    if node is None:
        return {}
    return (node.get("metadata") or {}).get("annotations") or {}


def paused(node: Mapping[str, Any] | None) -> bool:
    """An operator took the taint over (``vkprovider.io/gate-paused`` present and non-empty)."""
    return bool((node_annotations(node).get(PAUSED_ANNOTATION) or "").strip())


def read_heartbeat(node: Mapping[str, Any] | None) -> Heartbeat | None:
    """The node's heartbeat; None when absent. ``ValueError`` names what is malformed."""
    raw = node_annotations(node).get(HEARTBEAT_ANNOTATION)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        last = data.get("last_flip")
        return Heartbeat(
            owner=str(data["owner"]),
            renew_time=_moment(data["renew_time"]),
            timeout_seconds=float(data["timeout_seconds"]),
            taint_key=str(data["taint_key"]),
            last_flip=None if last is None else _moment(last),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"annotation {HEARTBEAT_ANNOTATION} is malformed: {exc}") from None
