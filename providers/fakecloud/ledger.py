"""The billing ledger: one entry per deployment, from create to delete/loss/terminal end.

Billing starts when the cloud accepts the create (provisioning is billed, as on real GPU clouds)
and ends at the first of: delete, loss, or the moment the run reached a terminal phase. Times are
unix seconds so entries from several fakecloud instances can be compared on one axis:
:func:`overlaps` finds a pod UID with two live deployments at once across instances, the
"twin that keeps billing" the service must never create. :func:`spend` sums the money.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict


class LedgerEntry(BaseModel):
    """One deployment's bill. ``ended_at`` is None while it still bills."""

    model_config = ConfigDict(extra="ignore")

    uid: str
    deployment_id: str
    provider: str
    #: the listening port of the instance ("" in-process without a server): several instances
    #: may share a provider name, never a port
    instance: str = ""
    offer_id: str
    gpu_type: str
    gpus: int
    price_per_hour: float
    started_at: float
    ended_at: float | None = None
    end_reason: str | None = None

    def cost(self, now: float) -> float:
        """Money billed up to ``now`` (or the end)."""
        end = self.ended_at if self.ended_at is not None else now
        return self.price_per_hour * max(0.0, end - self.started_at) / 3600.0

    def live_at(self, moment: float) -> bool:
        return self.started_at <= moment and (self.ended_at is None or moment < self.ended_at)


@dataclass(frozen=True)
class Overlap:
    """Two deployments of one pod UID billing at the same time (``since``..``until``)."""

    uid: str
    first: LedgerEntry
    second: LedgerEntry
    since: float
    until: float | None

    def describe(self) -> str:
        until = "still" if self.until is None else f"{self.until - self.since:.1f}s"
        return f"pod uid {self.uid}: {_where(self.first)} and {_where(self.second)} both live ({until})"


def _where(entry: LedgerEntry) -> str:
    return f"{entry.provider}{'@' + entry.instance if entry.instance else ''}/{entry.deployment_id}"


def overlaps(entries: Iterable[LedgerEntry]) -> list[Overlap]:
    """Every pair of entries of one UID whose ``[started_at, ended_at)`` intervals intersect.

    Pass the entries of *all* instances: a UID deployed on two clouds is only visible across them.
    """
    by_uid: dict[str, list[LedgerEntry]] = {}
    for entry in entries:
        by_uid.setdefault(entry.uid, []).append(entry)
    found: list[Overlap] = []
    for uid, items in by_uid.items():
        items.sort(key=lambda e: e.started_at)
        for i, first in enumerate(items):
            for second in items[i + 1 :]:
                first_end = first.ended_at if first.ended_at is not None else float("inf")
                if second.started_at >= first_end:
                    continue  # sorted by start: the rest may still overlap a longer-lived first
                ends = [e for e in (first.ended_at, second.ended_at) if e is not None]
                until = min(ends) if len(ends) == 2 else (ends[0] if ends else None)
                found.append(Overlap(uid, first, second, second.started_at, until))
    return found


def spend(entries: Iterable[LedgerEntry], now: float) -> float:
    return sum(entry.cost(now) for entry in entries)
