"""The fit engine: would kube-scheduler bind this pod to some local node right now?

A :class:`Snapshot` is built from the gate's informer caches (every node, every non-terminal
pod) and answers with the scheduler's filter plugins: ``NodeName``, ``NodeUnschedulable``,
``TaintToleration`` (NoSchedule/NoExecute), ``NodeAffinity`` (selector, terms, ``matchFields``),
``NodeResourcesFit`` (every resource kind, the pod slot), ``NodePorts``, ``InterPodAffinity``
(required, both directions) and ``PodTopologySpread`` (``DoNotSchedule``). A volume the gate
cannot judge makes the answer "no".

:meth:`Snapshot.place` then *reserves* what the answer used (requests, ports, the pod itself for
later affinity and spread checks), so one wave never plans two replicas into one slot — the
Descheduler's ``nodeFit`` ignores its own evictions within a run and does exactly that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from vkprovider.gate.affinity import (
    Unevaluable,
    node_affinity_admits,
    pod_affinity_admits,
    spread_admits,
)
from vkprovider.gate.podspec import Resources, host_ports, pod_requests, ports_conflict, unjudged_volumes
from vkprovider.gate.selector import tolerates
from vkprovider.gate.view import is_ready_node
from vkprovider.translate.quantity import parse_quantity

JSON = Mapping[str, Any]
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _uid(pod: JSON) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


@dataclass
class NodeState:
    node: JSON
    allocatable: Resources
    requested: Resources = field(default_factory=dict)
    ports: set[tuple[str, str, int]] = field(default_factory=set)
    pods: dict[str, JSON] = field(default_factory=dict)  #: uid -> pod

    @property
    def name(self) -> str:
        return str(self.node["metadata"]["name"])

    def add(self, pod: JSON) -> None:
        for name, amount in pod_requests(pod).items():
            self.requested[name] = self.requested.get(name, Decimal(0)) + amount
        self.ports |= host_ports(pod)
        self.pods[_uid(pod)] = pod

    def remove(self, uid: str) -> None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        for name, amount in pod_requests(pod).items():
            self.requested[name] = self.requested.get(name, Decimal(0)) - amount
        self.ports = set().union(*(host_ports(p) for p in self.pods.values()))

    def free(self, resource: str) -> Decimal:
        return self.allocatable.get(resource, Decimal(0)) - self.requested.get(resource, Decimal(0))


def _allocatable(node: JSON) -> Resources:
    out: Resources = {}
    for name, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            out[name] = parse_quantity(raw, name)
        except Exception:
            continue
    return out


class Snapshot:
    """Nodes and the pods bound (or nominated) to them; ``local`` are the nodes a replacement
    may go to (every node but the virtual ones), all nodes count as topology domains."""

    def __init__(self, nodes: Iterable[JSON], pods: Iterable[JSON], *, virtual: set[str]) -> None:
        self.nodes: dict[str, NodeState] = {
            n["metadata"]["name"]: NodeState(n, _allocatable(n)) for n in nodes
        }
        self.virtual = virtual
        for pod in pods:
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            where = spec.get("nodeName") or status.get("nominatedNodeName")
            if where in self.nodes:
                self.nodes[where].add(pod)

    def remove(self, pod: JSON) -> None:
        """Take a pod out (the replica a wave moves: its old copy is about to go)."""
        for state in self.nodes.values():
            state.remove(_uid(pod))

    def place(self, pod: JSON, node: str) -> None:
        """Reserve ``pod`` on ``node`` for the rest of this plan."""
        self.nodes[node].add(pod)

    def _placed(self) -> list[tuple[JSON, JSON]]:
        return [(p, s.node) for s in self.nodes.values() for p in s.pods.values()]

    def why_not(self, pod: JSON, state: NodeState) -> str:
        """'' when ``pod`` fits ``state``'s node, else the first failing predicate."""
        node, spec = state.node, pod.get("spec") or {}
        if spec.get("nodeName") and spec["nodeName"] != state.name:
            return "NodeName"
        if not is_ready_node(node):
            return "NodeNotReady"
        tolerations = spec.get("tolerations") or []
        if (node.get("spec") or {}).get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
            return "NodeUnschedulable"
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                return "TaintToleration"
        if not node_affinity_admits(pod, node):
            return "NodeAffinity"
        for name, amount in pod_requests(pod).items():
            if amount > 0 and amount > state.free(name):
                return f"Insufficient {name}"
        if ports_conflict(host_ports(pod), state.ports):
            return "NodePorts"
        placed = self._placed()
        try:
            if not pod_affinity_admits(pod, node, placed):
                return "InterPodAffinity"
            if not spread_admits(pod, node, (s.node for s in self.nodes.values()), placed):
                return "PodTopologySpread"
        except Unevaluable as exc:
            return f"Unevaluable: {exc}"
        return ""

    def find(self, pod: JSON) -> tuple[str | None, dict[str, str]]:
        """The first local node ``pod`` fits (``None`` if none, then why each node refused),
        trying nodes by name: the plan needs *a* feasible slot, not the scheduler's best one."""
        bad = unjudged_volumes(pod)
        if bad:
            return None, {"*": f"volumes the gate cannot judge: {', '.join(bad)}"}
        reasons: dict[str, str] = {}
        local = [s for name, s in sorted(self.nodes.items()) if name not in self.virtual]
        for state in local:
            why = self.why_not(pod, state)
            if not why:
                return state.name, reasons
            reasons[state.name] = why
        return None, reasons
