"""The "pods Pending → untaint at once" rule: which unschedulable pods the taint is keeping out.

A pod counts when the scheduler gave up on it (``PodScheduled=False``, reason
``Unschedulable``), it is not waiting on a preemption (no ``nominatedNodeName``), and the only
thing between it and the virtual node is the gate's taint: it tolerates every other
NoSchedule/NoExecute taint there, does not tolerate ours, and its node selector and required
node affinity admit the virtual node. Training pods (which do not tolerate the virtual node)
therefore never count, so preemption does not trip the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vkprovider.gate.config import TaintConfig
from vkprovider.gate.selector import tolerates
from vkprovider.gate.taint import is_ours


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or status.get("nominatedNodeName") or pod["metadata"].get("deletionTimestamp"):
        return False
    if status.get("phase", "Pending") != "Pending":
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or []
    )


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op in ("Gt", "Lt"):
            try:
                have, want = int(labels[key]), int(values[0])
            except (KeyError, ValueError, IndexError):
                return False
            if (op == "Gt" and not have > want) or (op == "Lt" and not have < want):
                return False
    return True


def admits(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector and required node affinity (label expressions) allow ``node``."""
    spec = pod.get("spec") or {}
    labels: Mapping[str, str] = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_term_matches(t, labels) for t in terms)


def blocked_by_gate(
    pods: Iterable[Mapping[str, Any]], virtual_node: Mapping[str, Any], cfg: TaintConfig
) -> list[str]:
    """``namespace/name`` of the unschedulable pods that only the gate's taint keeps out."""
    taints = [
        t
        for t in (virtual_node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute") and not is_ours(t, cfg)
    ]
    ours = cfg.as_taint()
    blocked = []
    for pod in pods:
        if not _unschedulable(pod):
            continue
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if tolerates(tolerations, ours) or not all(tolerates(tolerations, t) for t in taints):
            continue
        if admits(pod, virtual_node):
            meta = pod["metadata"]
            blocked.append(f"{meta.get('namespace', '')}/{meta['name']}")
    return blocked


def preempting(pods: Iterable[Mapping[str, Any]], virtual_node: str) -> int:
    """Pods waiting on a preemption (nominated to a node, not bound yet): whatever the signal,
    the gate never taints while the scheduler is clearing room for them."""
    count = 0
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        nominated = status.get("nominatedNodeName")
        if nominated and nominated != virtual_node and not spec.get("nodeName"):
            count += 1
    return count
