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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from vkprovider.gate.affinity import (
    Placed,
    Unevaluable,
    has_anti_affinity,
    node_affinity_admits,
    pod_affinity_admits,
    spread_check,
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
    repelling: dict[str, JSON] = field(default_factory=dict)  #: the pods with required anti-affinity

    @property
    def name(self) -> str:
        return str(self.node["metadata"]["name"])

    def add(self, pod: JSON) -> None:
        for name, amount in pod_requests(pod).items():
            self.requested[name] = self.requested.get(name, Decimal(0)) + amount
        self.ports |= host_ports(pod)
        self.pods[_uid(pod)] = pod
        if has_anti_affinity(pod):
            self.repelling[_uid(pod)] = pod

    def remove(self, uid: str) -> None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        self.repelling.pop(uid, None)
        for name, amount in pod_requests(pod).items():
            self.requested[name] = self.requested.get(name, Decimal(0)) - amount
        if host_ports(pod):
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
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        where = self.nodes.get(spec.get("nodeName") or status.get("nominatedNodeName") or "")
        for state in [where] if where is not None else self.nodes.values():
            state.remove(_uid(pod))

    def place(self, pod: JSON, node: str) -> None:
        """Reserve ``pod`` on ``node`` for the rest of this plan."""
        self.nodes[node].add(pod)

    def _relevant(self, pod: JSON) -> Placed:
        """The placed pods the affinity and spread checks need for ``pod``: all of them when it
        has pod affinity, anti-affinity or spread constraints of its own, else only those with a
        required anti-affinity (which may repel it). Keeps a check O(pods) per plan step, not
        O(nodes x pods)."""
        spec = pod.get("spec") or {}
        own = bool(spec.get("topologySpreadConstraints")) or any(
            ((spec.get("affinity") or {}).get(kind) or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            for kind in ("podAffinity", "podAntiAffinity")
        )
        if own:
            return [(p, s.node) for s in self.nodes.values() for p in s.pods.values()]
        return [(p, s.node) for s in self.nodes.values() for p in s.repelling.values()]

    def why_not(
        self,
        pod: JSON,
        state: NodeState,
        placed: Placed | None = None,
        wants: tuple[Resources, set[tuple[str, str, int]]] | None = None,
        spread: Callable[[JSON], bool] | None = None,
    ) -> str:
        """'' when ``pod`` fits ``state``'s node, else the first failing predicate. ``placed``:
        the pods that matter to affinity and spread (computed once per :meth:`find`)."""
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
        requests, ports = wants if wants is not None else (pod_requests(pod), host_ports(pod))
        for name, amount in requests.items():
            if amount > 0 and amount > state.free(name):
                return f"Insufficient {name}"
        if ports and ports_conflict(ports, state.ports):
            return "NodePorts"
        if placed is None:
            placed = self._relevant(pod)
        try:
            if not pod_affinity_admits(pod, node, placed):
                return "InterPodAffinity"
            if spread is None:
                spread = spread_check(pod, (s.node for s in self.nodes.values()), placed)
            if not spread(node):
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
        placed = self._relevant(pod)
        wants = (pod_requests(pod), host_ports(pod))  # parsed once, not per node
        spread = spread_check(pod, (s.node for s in self.nodes.values()), placed)
        for state in local:
            why = self.why_not(pod, state, placed, wants, spread)
            if not why:
                return state.name, reasons
            reasons[state.name] = why
        return None, reasons
