"""Spend caps per namespace, in currency per hour.

Spend is what the company pays: the offer's list price after the provider's negotiated
discount. Each placed pod holds its hourly cost under its UID until it is released, so a
re-placement of the same UID replaces (never doubles) its share. A namespace without a cap
(and no default cap) is unlimited.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType


class Budgets:
    def __init__(self, caps: Mapping[str, float] | None = None, default_cap: float | None = None) -> None:
        self._caps = dict(caps or {})
        self._default = default_cap
        self._held: dict[str, tuple[str, float]] = {}  # uid -> (namespace, cost per hour)
        self._spent: dict[str, float] = {}

    def cap(self, namespace: str) -> float | None:
        return self._caps.get(namespace, self._default)

    def spent(self, namespace: str) -> float:
        return self._spent.get(namespace, 0.0)

    def remaining(self, namespace: str, uid: str | None = None) -> float:
        """What ``uid`` may spend per hour in ``namespace`` (its own current share counts as free)."""
        cap = self.cap(namespace)
        if cap is None:
            return math.inf
        own = 0.0
        if uid is not None:
            held = self._held.get(uid)
            if held is not None and held[0] == namespace:
                own = held[1]
        return cap - self.spent(namespace) + own

    def held(self, uid: str) -> tuple[str, float] | None:
        """``(namespace, cost per hour)`` that ``uid`` holds, if any."""
        return self._held.get(uid)

    def restore(self, uid: str, held: tuple[str, float] | None) -> None:
        """Put ``uid`` back to what :meth:`held` said (undo a reservation)."""
        self.release(uid)
        if held is not None:
            self.commit(uid, *held)

    def commit(self, uid: str, namespace: str, cost_per_hour: float) -> None:
        self.release(uid)
        self._held[uid] = (namespace, cost_per_hour)
        self._spent[namespace] = self._spent.get(namespace, 0.0) + cost_per_hour

    def release(self, uid: str) -> None:
        held = self._held.pop(uid, None)
        if held is None:
            return
        namespace, cost = held
        left = self._spent.get(namespace, 0.0) - cost
        if left <= 1e-9 and not any(ns == namespace for ns, _ in self._held.values()):
            self._spent.pop(namespace, None)
        else:
            self._spent[namespace] = max(left, 0.0)

    def clear(self) -> None:
        """Forget every share (a new term rebuilds them by adoption); caps stay."""
        self._held.clear()
        self._spent.clear()

    def holdings(self) -> Mapping[str, tuple[str, float]]:
        """Read-only view: uid -> (namespace, cost per hour) of every placed pod."""
        return MappingProxyType(self._held)

    def summary(self) -> dict[str, dict[str, float | None]]:
        names = set(self._caps) | set(self._spent)
        return {ns: {"cap": self.cap(ns), "spent": round(self.spent(ns), 6)} for ns in sorted(names)}
