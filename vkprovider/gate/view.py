"""What the gate sees of the cluster: every Node and every non-terminal Pod, from informers.

One list+watch each (DESIGN §8: "from informers, not a list per reading"); the kube signal and
the pending-pods rule both read these caches. With ``kueue`` (the return wave is on) Kueue's
Workloads and queues are followed too, when its API is served (``vkprovider.gate.kueue_view``). Every change sets ``changed`` so the decision
loop can react within a tick instead of waiting a whole interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from vkprovider.gate.kueue_view import KueueView
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.informer import Informer

#: Pods that hold or want resources; Succeeded/Failed ones free theirs.
NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"


class ClusterView:
    def __init__(self, kube: KubeClient, *, kueue: bool = False) -> None:
        self.changed = asyncio.Event()
        self.nodes = Informer(kube, "/api/v1/nodes", handler=self._touch)
        self.pods = Informer(kube, "/api/v1/pods", field_selector=NON_TERMINAL, handler=self._touch)
        #: not part of ``synced``: the taint decision never waits for Kueue, only the wave does
        self.kueue = KueueView(kube, handler=self._touch) if kueue else None

    def _touch(self, _kind: str, _old: JSON | None, _new: JSON) -> None:
        self.changed.set()

    @property
    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.pods.synced.is_set()

    @property
    def nodes_synced(self) -> bool:
        """The Node cache is usable (the Pod cache may still be syncing, or never sync)."""
        return self.nodes.synced.is_set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.nodes.run())
            group.create_task(self.pods.run())
            if self.kueue is not None:
                group.create_task(self.kueue.run())

    async def wait_synced(self) -> None:
        await self.nodes.synced.wait()
        await self.pods.synced.wait()

    def node(self, name: str) -> JSON | None:
        return self.nodes.get(f"/{name}")

    def all_nodes(self) -> Iterable[JSON]:
        return self.nodes.cache.values()

    def all_pods(self) -> Iterable[JSON]:
        return self.pods.cache.values()


def _quantity(value: Any) -> float:
    """Extended resources such as GPUs are integers; tolerate a plain number or a string."""
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def pod_demand(pod: Mapping[str, Any], resource: str) -> float:
    """The scheduler's effective request: max(sum of containers, largest init container)
    plus overhead; an extended resource given only as a limit is requested at the limit."""
    spec = pod.get("spec") or {}

    def one(container: Mapping[str, Any]) -> float:
        res = container.get("resources") or {}
        amount = (res.get("requests") or {}).get(resource)
        if amount is None:
            amount = (res.get("limits") or {}).get(resource)
        return _quantity(amount) if amount is not None else 0.0

    main = sum(one(c) for c in spec.get("containers") or [])
    init = max((one(c) for c in spec.get("initContainers") or []), default=0.0)
    overhead = _quantity((spec.get("overhead") or {}).get(resource, 0))
    return max(main, init) + overhead


def is_ready_node(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
