"""The embedded signal: free GPUs on the local nodes, computed from the informer caches.

free = Σ over Ready, schedulable local nodes of
       allocatable - requests of the node's non-terminal pods - demand of pending pods
       nominated to it (``status.nominatedNodeName``),
so the GPUs a preemption is about to hand to training never read as free. A node counts as
schedulable when it is not cordoned and carries no NoSchedule/NoExecute taint the inference
pods (``tolerations`` in config) do not tolerate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from vkprovider.errors import ConfigError
from vkprovider.gate.config import KubeSignalConfig
from vkprovider.gate.selector import parse_selector, tolerates
from vkprovider.gate.signal import Reading, SignalUnavailable
from vkprovider.gate.view import ClusterView, is_ready_node, pod_demand


class KubeSignal:
    kind = "kube"

    def __init__(self, view: ClusterView, config: KubeSignalConfig) -> None:
        self._view = view
        self._config = config
        try:
            self._matches = parse_selector(config.node_selector)
        except ValueError as exc:
            raise ConfigError(f"gate.signal.kube.node_selector: {exc}") from None
        self._tolerations = [t.model_dump() for t in config.tolerations]

    async def start(self) -> None:
        """Nothing to wait for: a typo'd selector is refused at start-up (``Gate.preflight``);
        one that matches nothing later (nodes gone, caches never synced) is "signal
        unavailable" on every read, so the decision fails open instead of the term sticking."""
        return None

    async def close(self) -> None:
        return None

    def local_nodes(self) -> list[Mapping[str, Any]]:
        return [n for n in self._view.all_nodes() if self._matches(n["metadata"].get("labels") or {})]

    def _usable(self, node: Mapping[str, Any]) -> bool:
        spec = node.get("spec") or {}
        if spec.get("unschedulable") or not is_ready_node(node):
            return False
        return all(
            tolerates(self._tolerations, taint)
            for taint in spec.get("taints") or []
            if taint.get("effect") in ("NoSchedule", "NoExecute")
        )

    async def read(self) -> Reading:
        if not self._view.synced:
            raise SignalUnavailable("not_synced", "kube signal: node/pod caches not synced yet")
        resource = self._config.gpu_resource
        free: dict[str, float] = {}
        local = self.local_nodes()
        if not local:
            raise SignalUnavailable(
                "no_nodes",
                f"kube signal: gate.signal.kube.node_selector {self._config.node_selector!r} matches no node",
            )
        local_names = {n["metadata"]["name"] for n in local}
        for node in local:
            if self._usable(node):
                allocatable = (node.get("status") or {}).get("allocatable") or {}
                free[node["metadata"]["name"]] = float(str(allocatable.get(resource, 0)))
        used: dict[str, float] = defaultdict(float)
        preempting = 0
        for pod in self._view.all_pods():
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            bound = spec.get("nodeName")
            nominated = status.get("nominatedNodeName")
            if bound:
                used[bound] += pod_demand(pod, resource)
            elif isinstance(nominated, str) and nominated in local_names:
                preempting += 1
                used[nominated] += pod_demand(pod, resource)
        detail = {name: max(0.0, alloc - used[name]) for name, alloc in free.items()}
        return Reading(free_gpus=sum(detail.values()), preempting=preempting, detail=detail)
