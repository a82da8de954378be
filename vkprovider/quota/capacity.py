"""What the healthy nodes of a flavor offer: pure functions over Node objects.

A node counts only when it matches the flavor's labels, is not being deleted, is schedulable
(not cordoned) and Ready, and carries no taint that keeps the flavor's workloads off: a
``NoSchedule``/``NoExecute`` taint they do not tolerate (a GPU pool tainted
``nvidia.com/gpu=present:NoSchedule`` counts only when its workloads tolerate that), and never a
node that is on its way out whatever they tolerate: the cluster autoscaler's
``ToBeDeletedByClusterAutoscaler`` and ``DeletionCandidateOfClusterAutoscaler``,
``node.kubernetes.io/out-of-service``, and the configured maintenance taints. Anything else
would let Kueue admit a gang whose pods cannot all be placed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vkprovider.errors import InvalidRequest
from vkprovider.translate.quantity import parse_quantity

JSON = dict[str, Any]
HEALTHY = "healthy"
#: Taints of a node that is leaving: never counted, even by workloads that tolerate everything.
AUTOSCALER_TAINTS = ("ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler")
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
_REPELLING = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeState:
    name: str
    #: ``healthy`` or why not: deleting, cordoned, NotReady, ``maintenance taint <key>``,
    #: ``autoscaler taint <key>``, ``out-of-service taint``, ``untolerated taint <k=v:effect>``,
    #: ``counted in flavor <name>``
    state: str
    allocatable: Mapping[str, Decimal]

    @property
    def healthy(self) -> bool:
        return self.state == HEALTHY


def in_pool(node: JSON, selector: Mapping[str, str]) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def node_state(
    node: JSON,
    resources: Iterable[str],
    maintenance_taints: Iterable[str],
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> NodeState:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    allocatable: dict[str, Decimal] = {}
    for name in resources:
        raw = (status.get("allocatable") or {}).get(name)
        try:
            allocatable[name] = parse_quantity(raw, name) if raw is not None else Decimal(0)
        except InvalidRequest:
            allocatable[name] = Decimal(0)  # a garbled node status offers nothing
    why = _why_not(meta, spec, status, set(maintenance_taints), tolerations)
    return NodeState(meta["name"], why, allocatable)


def _why_not(
    meta: JSON, spec: JSON, status: JSON, maintenance: set[str], tolerations: Sequence[Mapping[str, Any]]
) -> str:
    if meta.get("deletionTimestamp"):
        return "deleting"
    if spec.get("unschedulable"):
        return "cordoned"
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        return "NotReady"
    taints = spec.get("taints") or []
    for taint in taints:  # leaving nodes first: the reason an operator needs to see
        key = taint.get("key") or ""
        if key in maintenance:
            return f"maintenance taint {key}"
        if key in AUTOSCALER_TAINTS:
            return f"autoscaler taint {key}"
        if key == OUT_OF_SERVICE_TAINT:
            return "out-of-service taint"
    for taint in taints:
        if taint.get("effect") in _REPELLING and not tolerates(tolerations, taint):
            return f"untolerated taint {describe_taint(taint)}"
    return HEALTHY


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """The scheduler's rule (``v1.Toleration.ToleratesTaint``): some toleration matches the
    taint's effect (empty: any), key (empty with ``Exists``: any) and value (``Equal``)."""
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key, operator = tol.get("key") or "", tol.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def describe_taint(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + value if value else ''}:{taint.get('effect')}"


def offered(
    nodes: Iterable[NodeState], resources: Iterable[str], reserve: Mapping[str, Decimal]
) -> dict[str, Decimal]:
    """Summed allocatable of the healthy nodes, minus the reserve, never below zero."""
    healthy = [node for node in nodes if node.healthy]
    total = {
        name: sum((n.allocatable.get(name, Decimal(0)) for n in healthy), Decimal(0)) for name in resources
    }
    return {name: max(Decimal(0), amount - reserve.get(name, Decimal(0))) for name, amount in total.items()}
