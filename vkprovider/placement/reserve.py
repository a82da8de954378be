"""Reserve a pod's budget share, spread slot and capacity unit *before* the awaited deploy.

The ranker reads budgets, spread and capacity without I/O, but a deploy then awaits the provider
for seconds. With many workers, every concurrent deploy of one namespace saw the same remaining
budget and all went ahead (a namespace capped at 2.0/h reached 6.0/h). So the Placer re-checks
and takes the candidate's share synchronously (one event loop: nothing interleaves between the
check and the take) right before calling the provider, gives it back if the call fails, and keeps
it if it succeeds. A concurrent deploy therefore sees the share as spent while the call is in
flight, and moves to another candidate or stays Pending with ``BudgetExceeded``.

The provider a pod already runs on (hysteresis) is exempt from the checks, as in the ranker: the
pod already holds that capacity and spend; its share is only re-priced.
"""

from __future__ import annotations

from dataclasses import dataclass

from vkprovider.placement import filters as f
from vkprovider.placement.budget import Budgets
from vkprovider.placement.catalog import Catalog
from vkprovider.placement.spread import Spread
from vkprovider.placement.types import Candidate, PodContext


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one candidate took, and what the UID held before (restored if the call fails)."""

    uid: str
    budget_before: tuple[str, float] | None
    spread_before: tuple[str, str] | None
    capacity: tuple[str, str] | None  # (provider, offer id) whose unit was taken


class Reserver:
    def __init__(self, budgets: Budgets, spread: Spread, catalog: Catalog) -> None:
        self._budgets = budgets
        self._spread = spread
        self._catalog = catalog

    def reserve(self, uid: str, ctx: PodContext, cand: Candidate, share: float | None) -> Reservation | str:
        """Take ``cand``'s share for ``uid``, or return the filter code that now refuses it."""
        provider, offer_id = cand.provider, cand.offer.offer_id
        if not cand.current:
            if (self._catalog.capacity(provider, offer_id) or 0) <= 0:
                return f.CAPACITY
            if not self._spread.allowed(ctx.workload, provider, share, uid):
                return f.SPREAD
            if cand.discounted_price > self._budgets.remaining(ctx.namespace, uid) + 1e-9:
                return f.BUDGET
        before = Reservation(uid, self._budgets.held(uid), self._spread.held(uid), None)
        self._budgets.commit(uid, ctx.namespace, cand.discounted_price)
        self._spread.add(uid, ctx.workload, provider)
        if cand.current:
            return before
        self._catalog.take(provider, offer_id)
        return Reservation(uid, before.budget_before, before.spread_before, (provider, offer_id))

    def undo(self, res: Reservation) -> None:
        """The call failed: give the share back and restore what the UID held before."""
        self._budgets.restore(res.uid, res.budget_before)
        self._spread.restore(res.uid, res.spread_before)
        if res.capacity is not None:
            self._catalog.give_back(*res.capacity)
