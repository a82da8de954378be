"""The "pods Pending → untaint at once" rule: which unschedulable pods the taint is keeping out.

A pod counts only when the gate's taint is really what keeps it off the virtual node — every
other reason the scheduler would refuse the node rules it out, because untainting for a pod the
node cannot take anyway switches the return off for nothing:

* the scheduler gave up on it (``PodScheduled=False``, reason ``Unschedulable``), it is not
  waiting on a preemption (no ``nominatedNodeName``), and no DaemonSet owns it (a DaemonSet pod
  is pinned to one node by ``matchFields``; it is never a burst candidate);
* it tolerates every other NoSchedule/NoExecute taint of the virtual node, and not ours;
* its ``nodeSelector`` and required node affinity admit the virtual node, with the API's
  semantics: terms are ORed, an empty (or null) term matches nothing, ``matchFields`` matches
  ``metadata.name`` (``In``/``NotIn``) — the one evaluation the wave planner uses too
  (``vkprovider/gate/affinity.py``), so the two never disagree on which node a pod may take;
* its demand fits what the virtual node has left (``vkprovider/gate/room.py``): a 16-GPU pod
  on a node that offers 8 is not the gate's business.

Training pods (which do not tolerate the virtual node) therefore never count, so preemption
does not trip the rule. How long one pod may hold the taint off is capped
(``vkprovider/gate/pending_hold.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vkprovider.gate.affinity import node_affinity_admits
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.room import Room
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


def daemonset_owned(pod: Mapping[str, Any]) -> bool:
    refs = pod["metadata"].get("ownerReferences") or []
    return any(r.get("kind") == "DaemonSet" for r in refs)


def blocking_pods(
    pods: Sequence[Mapping[str, Any]], virtual_node: Mapping[str, Any], cfg: TaintConfig
) -> list[Mapping[str, Any]]:
    """The unschedulable pods that only the gate's taint keeps out (``pods``: every
    non-terminal pod, so the virtual node's remaining room can be computed)."""
    taints = [
        t
        for t in (virtual_node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute") and not is_ours(t, cfg)
    ]
    ours = cfg.as_taint()
    room: Room | None = None
    blocked = []
    for pod in pods:
        if not _unschedulable(pod) or daemonset_owned(pod):
            continue
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if tolerates(tolerations, ours) or not all(tolerates(tolerations, t) for t in taints):
            continue
        if not node_affinity_admits(pod, virtual_node):
            continue
        if room is None:
            room = Room.of(virtual_node, pods)
        if room.fits(pod):
            blocked.append(pod)
    return blocked


def blocked_by_gate(
    pods: Iterable[Mapping[str, Any]], virtual_node: Mapping[str, Any], cfg: TaintConfig
) -> list[str]:
    """``namespace/name`` of the unschedulable pods that only the gate's taint keeps out."""
    return [pod_key(p) for p in blocking_pods(list(pods), virtual_node, cfg)]


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


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
