"""What the healthy local nodes offer: pure functions over Node objects.

A node counts only when it matches the pool's labels, is Ready, schedulable (not cordoned), not
being deleted and carries none of the configured maintenance taints. Anything else would let
Kueue admit a gang whose pods cannot all be placed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vkprovider.errors import InvalidRequest
from vkprovider.translate.quantity import parse_quantity

JSON = dict[str, Any]
HEALTHY = "healthy"


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  #: ``healthy`` or why not: cordoned, NotReady, maintenance taint <key>, deleting
    allocatable: Mapping[str, Decimal]

    @property
    def healthy(self) -> bool:
        return self.state == HEALTHY


def in_pool(node: JSON, selector: Mapping[str, str]) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def node_state(node: JSON, resources: Iterable[str], maintenance_taints: Iterable[str]) -> NodeState:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    allocatable: dict[str, Decimal] = {}
    for name in resources:
        raw = (status.get("allocatable") or {}).get(name)
        try:
            allocatable[name] = parse_quantity(raw, name) if raw is not None else Decimal(0)
        except InvalidRequest:
            allocatable[name] = Decimal(0)  # a garbled node status offers nothing
    return NodeState(meta["name"], _why_not(meta, spec, status, set(maintenance_taints)), allocatable)


def _why_not(meta: JSON, spec: JSON, status: JSON, maintenance: set[str]) -> str:
    if meta.get("deletionTimestamp"):
        return "deleting"
    if spec.get("unschedulable"):
        return "cordoned"
    for taint in spec.get("taints") or []:
        if taint.get("key") in maintenance:
            return f"maintenance taint {taint['key']}"
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        return "NotReady"
    return HEALTHY


def offered(
    nodes: Iterable[NodeState], resources: Iterable[str], reserve: Mapping[str, Decimal]
) -> dict[str, Decimal]:
    """Summed allocatable of the healthy nodes, minus the reserve, never below zero."""
    healthy = [node for node in nodes if node.healthy]
    total = {
        name: sum((n.allocatable.get(name, Decimal(0)) for n in healthy), Decimal(0)) for name in resources
    }
    return {name: max(Decimal(0), amount - reserve.get(name, Decimal(0))) for name, amount in total.items()}
