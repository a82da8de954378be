"""A ceiling on how long one Pending pod can hold the gate's taint off.

The Pending rule untaints (and refuses to re-taint) while pods that only the taint keeps out
are unschedulable. Once the taint is off such a pod normally binds to the virtual node within
seconds; one that is still Pending ``pending_hold_max_seconds`` later is not kept out by the
taint (something the rule cannot see refuses it: a quota, a volume, a webhook), and letting it
switch the return off for hours keeps the cloud billing for nothing. So past the ceiling it no
longer counts, with one Warning Event on the pod (``GatePendingHoldExpired``) and one log line
naming it. A pod that leaves the Pending set is forgotten (it starts from zero if it returns).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from vkprovider.kube.events import EventRecorder

log = logging.getLogger(__name__)


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta['name']}")


class HoldCeiling:
    def __init__(self, max_seconds: float) -> None:
        self.max_seconds = max_seconds
        self._since: dict[str, float] = {}  #: pod -> monotonic time it first held the taint off
        self._expired: set[str] = set()  #: pods already reported as past the ceiling

    async def admit(
        self, pods: Sequence[Mapping[str, Any]], now: float, events: EventRecorder | None = None
    ) -> list[Mapping[str, Any]]:
        """The pods of ``pods`` still allowed to hold the taint off at ``now``."""
        present = {_key(p) for p in pods}
        self._since = {k: v for k, v in self._since.items() if k in present}
        self._expired &= present
        admitted = []
        for pod in pods:
            key = _key(pod)
            held = now - self._since.setdefault(key, now)
            if held < self.max_seconds:
                admitted.append(pod)
            elif key not in self._expired:
                self._expired.add(key)
                await self._report(pod, held, events)
        return admitted

    async def _report(self, pod: Mapping[str, Any], held: float, events: EventRecorder | None) -> None:
        meta = pod["metadata"]
        name = f"{meta.get('namespace', '')}/{meta['name']}"
        message = (
            f"pod {name} has held the gate's taint off for {held:.0f}s and is still Pending "
            f"(gate.pending_hold_max_seconds = {self.max_seconds:g}): the taint is not what keeps "
            "it out, so it no longer counts"
        )
        log.warning("gate: %s", message)
        if events is not None:
            involved = {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": meta.get("namespace", ""),
                "name": meta["name"],
                "uid": meta.get("uid", ""),
            }
            await events.record(involved, "Warning", "GatePendingHoldExpired", message)
