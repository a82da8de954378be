"""Node Events for what on-call needs to see in ``kubectl describe node``: a provider becoming
unreachable (Warning) or reachable again (Normal), and the circuit breaker opening and closing.

Only *changes* are reported, once each, so an hour-long outage is two Events per provider, not
one per probe. The breaker's flips are also logged here, once each (provider reachability is
logged by the prober).
"""

from __future__ import annotations

import logging
import time

from vkprovider.kube.client import KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.node.conditions import Reachability
from vkprovider.placement.health import TAINT_UNAVAILABLE

log = logging.getLogger(__name__)

COMPONENT = "vkprovider"


class NodeEvents:
    def __init__(self, kube: KubeClient, node_name: str) -> None:
        self._recorder = EventRecorder(kube, component=COMPONENT, host=node_name)
        self._node = node_name
        self._down_since: dict[str, float] = {}  #: provider -> monotonic time it went unreachable
        self._breaker = False

    async def report(self, node_uid: str, reach: Reachability, breaker_open: bool) -> None:
        involved = {"apiVersion": "v1", "kind": "Node", "name": self._node, "uid": node_uid}
        errors = dict(reach.errors)
        now = time.monotonic()
        for name in reach.unreachable:
            if name not in self._down_since:
                self._down_since[name] = now
                await self._recorder.record(
                    involved,
                    "Warning",
                    "ProviderUnreachable",
                    f"provider {name} is unreachable ({errors.get(name) or 'probe failed'}): its pods "
                    "keep running with their last observed status; new pods go to other providers",
                )
        for name in [n for n in self._down_since if n not in reach.unreachable]:
            since = self._down_since.pop(name)
            if name in reach.reachable:
                await self._recorder.record(
                    involved,
                    "Normal",
                    "ProviderReachable",
                    f"provider {name} is reachable again after {now - since:.0f}s",
                )
        if breaker_open != self._breaker:
            self._breaker = breaker_open
            await self._breaker_flipped(involved, breaker_open, reach)

    async def _breaker_flipped(self, involved: dict[str, str], opened: bool, reach: Reachability) -> None:
        if opened:
            message = (
                f"circuit breaker open: no provider can take new pods ({', '.join(reach.unreachable) or 'all disabled'}"
                f" failing); node tainted {TAINT_UNAVAILABLE}:NoSchedule and nvidia.com/gpu set to 0. "
                "Running pods are not touched"
            )
            log.warning(message, extra={"node": self._node})
            await self._recorder.record(involved, "Warning", "CircuitBreakerOpen", message)
        else:
            message = "circuit breaker closed: a provider can take new pods again"
            log.info(message, extra={"node": self._node})
            await self._recorder.record(involved, "Normal", "CircuitBreakerClosed", message)
