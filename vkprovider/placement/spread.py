"""Workload spread across providers, and hysteresis for pods that already run somewhere.

Spread: with a max share ``s``, a provider may hold at most ``max(1, ceil(s * n))`` of a
workload's ``n`` replicas (counting the one being placed), so one provider outage cannot take
the whole workload down. The ``max(1, ...)`` lets the first replica go anywhere; ``ceil`` keeps
``s = 0.5`` on two providers schedulable for every replica count.

Hysteresis: a pod already deployed on a provider stays there: price alone never moves it.
The ranker puts the current provider's candidates first and exempts them from the capacity,
blocklist, budget and spread filters (the pod already holds that capacity and spend).
"""

from __future__ import annotations

import math
from collections import Counter


def spread_limit(max_share: float, replicas_after: int) -> int:
    return max(1, math.ceil(max_share * replicas_after - 1e-9))


class Spread:
    def __init__(self) -> None:
        self._pods: dict[str, tuple[str, str]] = {}  # uid -> (workload, provider)
        self._counts: dict[str, Counter[str]] = {}

    def held(self, uid: str) -> tuple[str, str] | None:
        """``(workload, provider)`` that ``uid`` holds, if any."""
        return self._pods.get(uid)

    def restore(self, uid: str, held: tuple[str, str] | None) -> None:
        """Put ``uid`` back to what :meth:`held` said (undo a reservation)."""
        self.release(uid)
        if held is not None:
            self.add(uid, *held)

    def allowed(self, workload: str | None, provider: str, max_share: float | None, uid: str) -> bool:
        """May ``uid`` (a replica of ``workload``) be placed on ``provider``?"""
        if workload is None or max_share is None:
            return True
        counts = self._counts.get(workload)
        if not counts:
            return True
        total, here = counts.total(), counts[provider]
        held = self._pods.get(uid)
        if held is not None and held[0] == workload:  # re-placement: do not count it twice
            total -= 1
            here -= held[1] == provider
        return here + 1 <= spread_limit(max_share, total + 1)

    def add(self, uid: str, workload: str | None, provider: str) -> None:
        self.release(uid)
        if workload is None:
            return
        self._pods[uid] = (workload, provider)
        self._counts.setdefault(workload, Counter())[provider] += 1

    def clear(self) -> None:
        """Forget every slot (a new term rebuilds them by adoption)."""
        self._pods.clear()
        self._counts.clear()

    def release(self, uid: str) -> None:
        held = self._pods.pop(uid, None)
        if held is None:
            return
        workload, provider = held
        counts = self._counts[workload]
        counts[provider] -= 1
        if counts[provider] <= 0:
            del counts[provider]
        if not counts:
            del self._counts[workload]
