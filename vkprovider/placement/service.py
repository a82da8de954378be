"""The Placer: the one object the pod controller calls to place, and later release, a pod.

``rank`` is pure and fast (reads cached catalogs and state, never does I/O). ``deploy`` settles
earlier ambiguous creates of the UID (``ambiguous``), ranks, then tries candidates in order:
each one's budget/spread/capacity share is reserved before its call (``reserve``) and the call
reacts to its error class (``failover``). When nothing worked it raises :class:`NotPlaced` (an
``Unschedulable``): the pod stays Pending and the caller retries with backoff; its ``reason`` is
``NoCandidates``, ``BudgetExceeded``, ``CircuitOpen`` or ``AllProvidersFailed``. Statuses the pod
controller records come back through :meth:`Placer.observe` (``observe``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from vkprovider.errors import InvalidRequest, VkProviderError
from vkprovider.metrics import PLACEMENT_SECONDS
from vkprovider.models import DeploymentRequest, DeploymentStatus, ProviderInfo
from vkprovider.placement.ambiguous import OpenCreates, Settled
from vkprovider.placement.blocklist import Blocklist, block_key
from vkprovider.placement.budget import Budgets
from vkprovider.placement.catalog import Catalog
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.constraints import effective_need, parse_constraints
from vkprovider.placement.explain import no_candidates_message
from vkprovider.placement.failover import Failover, refused_everywhere
from vkprovider.placement.health import ProviderHealth
from vkprovider.placement.observe import Observer
from vkprovider.placement.rank import RankInputs, rank_offers
from vkprovider.placement.ratelimit import RateLimiters
from vkprovider.placement.reserve import Reserver
from vkprovider.placement.score import ProviderTerms, provider_terms
from vkprovider.placement.shared_offers import SharedOffers
from vkprovider.placement.spread import Spread
from vkprovider.placement.types import (
    Attempt,
    Candidate,
    Decision,
    NotPlaced,
    Placement,
    PlacementTarget,
    PodContext,
)

__all__ = ["DETAIL_CANDIDATES", "NotPlaced", "Placer"]

log = logging.getLogger(__name__)

_TERMS_MAX_AGE = 5.0
DETAIL_CANDIDATES = 50


class Placer:
    def __init__(
        self,
        providers: Mapping[str, PlacementTarget],
        config: PlacementConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        limiters: RateLimiters | None = None,
        offers: SharedOffers | None = None,
    ) -> None:
        """``limiters``: client-side rate limits shared with other placers (the virtual nodes of
        one process, ``vkprovider.served_node``), so together they keep a provider's limit;
        ``offers``: their catalog entries, so a provider's offers are fetched once for all."""
        self.config = cfg = config or PlacementConfig()
        self.providers = dict(providers)
        self._clock = clock
        self._sleep = sleep
        self.health = ProviderHealth(
            self.providers,
            breaker_seconds=cfg.breaker_seconds,
            failure_window_seconds=cfg.failure_window_seconds,
            quota_reenable_seconds=cfg.quota_reenable_seconds,
            unreachable_after_failures=cfg.unreachable_after_failures,
            clock=clock,
        )
        self.blocklist = Blocklist(cfg.blocklist_ttl_seconds, clock=clock)
        self.limiters = limiters or RateLimiters(
            cfg.rate_limit,
            {n: c.rate_limit for n, c in cfg.providers.items()},
            default_is_explicit="rate_limit" in cfg.model_fields_set,
            clock=clock,
            sleep=sleep,
        )
        self._limits_learned: set[str] = set()
        self.catalog = Catalog(
            self.providers,
            refresh_seconds=cfg.offer_refresh_seconds,
            timeout_seconds=cfg.offer_timeout_seconds,
            limiters=self.limiters,
            clock=clock,
            on_refresh=self.health.record_probe,  # a refresh reaches the provider's API too
            shared=offers,
        )
        self.budgets = Budgets(cfg.namespace_budgets, cfg.default_namespace_budget)
        self.spread = Spread()
        self._reserver = Reserver(self.budgets, self.spread, self.catalog)
        self._open = OpenCreates(
            self.providers, timeout=cfg.reconcile_timeout_seconds, acquire=self.limiters.acquire
        )
        self._failover = Failover(
            self.providers,
            cfg,
            health=self.health,
            blocklist=self.blocklist,
            limiters=self.limiters,
            open_creates=self._open,
            sleep=sleep,
        )
        self._observer = Observer(self.health)
        self._placed: dict[str, tuple[str, str]] = {}  # uid -> (provider, offer id)
        self._adopted: set[str] = set()  # uids placed by adoption this term (not by our deploy)
        self.term = 0  #: terms begun (``begin_term``)
        self._terms: dict[str, ProviderTerms] = {}
        self._terms_key: tuple[int, int] = (-1, -1)

    # Catalog ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Keep every provider's catalog fresh until cancelled."""
        await self.learn_limits()
        await self.catalog.run()

    async def refresh(self) -> dict[str, bool]:
        """Refresh every provider's catalog now (at start-up and in tests)."""
        await self.learn_limits()
        return await self.catalog.refresh_all()

    async def learn_limits(self) -> None:
        """Ask each adapter not asked yet for its API's rate limit (``ProviderInfo``), the default
        for its client-side limit where config sets none. One that cannot answer now keeps the
        built-in default and is asked again at the next :meth:`refresh`."""
        names = [
            n for n in self.providers if n not in self._limits_learned and not self.limiters.configured(n)
        ]
        results = await asyncio.gather(*(self._info(n) for n in names), return_exceptions=True)
        for name, info in zip(names, results, strict=True):
            if isinstance(info, BaseException):
                if isinstance(info, asyncio.CancelledError):
                    raise info
                log.info("provider %s: no rate limit learned (%s); using the default", name, info)
                continue
            self.limiters.declare(name, info.capabilities.rate_limit)
            self._limits_learned.add(name)

    async def _info(self, name: str) -> ProviderInfo:
        async with asyncio.timeout(self.config.offer_timeout_seconds):
            return await self.providers[name].info()

    # Decisions ----------------------------------------------------------------------------
    def rank(self, request: DeploymentRequest, ctx: PodContext, *, detail: bool = False) -> Decision:
        """Ranked candidates and rejection counts (per-offer reasons with ``detail``); no I/O.

        Raises ``InvalidRequest(reason="InvalidAnnotation")`` for a bad placement annotation.
        """
        inputs = self.rank_inputs(request, ctx)
        if detail:  # explanations may list more rows than a deploy will ever try
            inputs.max_candidates = max(inputs.max_candidates, DETAIL_CANDIDATES)
        return rank_offers(request.uid, inputs, stale=self.catalog.stale(), detail=detail)

    def rank_inputs(self, request: DeploymentRequest, ctx: PodContext) -> RankInputs:
        """The snapshot one decision reads (exposed for tests and the reference ranker)."""
        need = effective_need(request, parse_constraints(ctx.annotations), self.config)
        uid, share = request.uid, need.spread_max_share
        # A UID we already placed (and nobody released) stays put: a second deploy must never
        # create a twin deployment on another provider.
        placed = self._placed.get(uid)
        current = ctx.current_provider or (placed[0] if placed else None)
        current_offer = ctx.current_offer or (placed[1] if placed and placed[0] == current else None)
        return RankInputs(
            catalogs=self.catalog.providers,
            need=need,
            terms=self._terms_now(),
            unusable=self.health.unusable_reason,
            blocked=self.blocklist.active(),
            budget_remaining=self.budgets.remaining(ctx.namespace, uid),
            spread_ok=lambda p: self.spread.allowed(ctx.workload, p, share, uid),
            current_provider=current,
            current_offer=current_offer,
            max_candidates=self.config.max_candidates,
        )

    def _terms_now(self) -> Callable[[str], ProviderTerms]:
        """Memoised scoring terms; recomputed when health changes or every few seconds (the
        failure window slides with time)."""
        key = (self.health.version, int(self._clock() // _TERMS_MAX_AGE))
        if key != self._terms_key:
            self._terms_key, self._terms = key, {}
        cache = self._terms

        def terms(name: str) -> ProviderTerms:
            found = cache.get(name)
            if found is None:
                found = cache[name] = provider_terms(name, self.config, self.health)
            return found

        return terms

    async def deploy(self, request: DeploymentRequest, ctx: PodContext) -> Placement:
        """Place the pod: settle earlier ambiguous creates, rank, then try candidates in order.

        Raises :class:`~vkprovider.placement.ambiguous.Unsettled` (``Transient``) when a create
        may have succeeded somewhere and that provider cannot confirm it yet, and
        ``InvalidRequest`` (fail the pod) only when every candidate tried refused it. Its latency is
        recorded by outcome: ``placed``, the ``NotPlaced`` reason, or the error class."""
        started, outcome = time.perf_counter(), "Cancelled"
        try:
            placement = await self._deploy(request, ctx)
            outcome = "placed"
            return placement
        except NotPlaced as exc:
            outcome = exc.reason
            raise
        except VkProviderError as exc:
            outcome = exc.code
            raise
        except Exception:
            outcome = "error"
            raise
        finally:
            PLACEMENT_SECONDS.labels(outcome).observe(time.perf_counter() - started)

    async def _deploy(self, request: DeploymentRequest, ctx: PodContext) -> Placement:
        uid = request.uid
        ctx, inputs, decision = await self._decide(request, ctx)
        share = inputs.need.spread_max_share
        warnings: list[tuple[str, str]] = []
        if ctx.current_provider is None and self.health.breaker_open():
            raise NotPlaced(
                f"circuit open: every provider failing for {self.config.breaker_seconds:g}s",
                reason="CircuitOpen",
                decision=decision,
                warnings=warnings,
            )
        if not decision.candidates:
            budget_only = decision.rejected_counts.get("budget", 0) > 0
            raise NotPlaced(
                no_candidates_message(decision, ctx.namespace, self.budgets.cap(ctx.namespace)),
                reason="BudgetExceeded" if budget_only else "NoCandidates",
                decision=decision,
                warnings=warnings,
            )
        attempts: list[Attempt] = []
        refusals: list[tuple[str, InvalidRequest]] = []
        calls = 0
        for cand in decision.candidates:
            if calls >= self.config.max_attempts:
                break
            offer, name = cand.offer, cand.provider
            if any(name == refused for refused, _ in refusals):
                continue  # it refused this very request: its other offers would too
            if not cand.current and (
                self.health.disabled(name)
                or self.blocklist.is_blocked(block_key(name, offer.gpu_type, offer.region))
            ):
                continue  # disabled/blocklisted by an earlier attempt of this very deploy
            held = self._reserver.reserve(uid, ctx, cand, share)
            if isinstance(held, str):  # a concurrent deploy took the budget/slot/unit meanwhile
                attempts.append(Attempt(name, offer.offer_id, held, "taken by a concurrent placement"))
                continue
            calls += 1
            try:
                outcome = await self._failover.call(name, offer, request)
            except BaseException:
                self._reserver.undo(held)
                raise
            attempts.append(outcome.attempt)
            if outcome.warning is not None:
                warnings.append(outcome.warning)
            if outcome.refused is not None:
                refusals.append((name, outcome.refused))
            if (status := outcome.status) is not None:
                self._commit(uid, cand)
                fresh = not cand.current and not outcome.adopted
                self._observer.deployed(uid, name, self._clock() if fresh else None)
                self._observer.observe(uid, name, status, self._clock())
                final = replace(decision, chosen=cand, attempts=tuple(attempts))
                return Placement(name, offer, status, final, warnings)
            self._reserver.undo(held)
        if refusals and len(refusals) == calls:  # nobody would take it as written: fail the pod
            raise refused_everywhere(refusals)
        final = replace(decision, attempts=tuple(attempts))
        tried = "; ".join(f"{a.provider}/{a.offer_id}: {a.outcome}" for a in attempts) or "none usable"
        reason = "AllProvidersFailed"
        if calls == 0:
            reason = "BudgetExceeded" if any(a.outcome == "budget" for a in attempts) else "NoCandidates"
        raise NotPlaced(f"all candidates failed ({tried})", reason=reason, decision=final, warnings=warnings)

    async def _decide(
        self, request: DeploymentRequest, ctx: PodContext
    ) -> tuple[PodContext, RankInputs, Decision]:
        """Rank, after settling earlier ambiguous creates of this UID (a live one is kept)."""
        uid = request.uid
        kept = await self._settle_earlier(uid, ctx)
        inputs = self.rank_inputs(request, kept)
        decision = rank_offers(uid, inputs, stale=self.catalog.stale())
        if kept is ctx or any(c.current for c in decision.candidates):
            return kept, inputs, decision
        # Found live where no offer fits the pod any more: remove it, then choose afresh.
        assert kept.current_provider is not None
        self._open.open(uid, kept.current_provider)
        await self._open.settle(uid, kept.current_provider, keep_live=False)
        inputs = self.rank_inputs(request, ctx)
        return ctx, inputs, rank_offers(uid, inputs, stale=self.catalog.stale())

    async def _settle_earlier(self, uid: str, ctx: PodContext) -> PodContext:
        """Settle this UID's open questions from earlier deploys before choosing anything.

        A deployment found live is kept where it is (the ranker's hysteresis puts its provider
        first and the idempotent deploy returns it); every other provider must then not hold one.
        """
        live: list[Settled] = []
        for name in self._open.providers_of(uid):
            settled = await self._open.settle(uid, name)
            if settled.status is not None:
                live.append(settled)
        if not live:
            return ctx
        keep = next((s for s in live if s.provider == ctx.current_provider), live[0])
        for extra in live:
            if extra is not keep:  # two live: keep one, delete the rest before going on
                self._open.open(uid, extra.provider)
                await self._open.settle(uid, extra.provider, keep_live=False)
        assert keep.status is not None
        return replace(ctx, current_provider=keep.provider, current_offer=keep.status.offer_id or None)

    # Bookkeeping --------------------------------------------------------------------------
    def _commit(self, uid: str, cand: Candidate) -> None:
        """The deploy worked: the reservation stands; a previous offer's unit is given back."""
        key = (cand.provider, cand.offer.offer_id)
        previous = self._placed.get(uid)
        if previous is not None and previous != key and previous[1]:
            self.catalog.give_back(*previous)
        self._placed[uid] = key
        self._adopted.discard(uid)

    def begin_term(self) -> None:
        """A leadership term (or a supervised restart of the pod controller) begins: every
        per-pod record — placements, budget shares, spread slots, open creates, followed
        statuses — starts empty and is rebuilt by adoption from what the providers list.

        Why: between two terms of this replica another one may have led and deleted pods; their
        shares kept from our earlier term would hold budgets and spread slots of pods that no
        longer exist (new pods Pending ``BudgetExceeded`` where nothing runs). Provider-level
        state (health, breaker, blocklist, catalogs, rate limits) is about the providers, not
        the pods, and is kept. Catalog units taken optimistically are not given back: the next
        refresh says what is free."""
        self.term += 1
        self._placed.clear()
        self._adopted.clear()
        self.budgets.clear()
        self.spread.clear()
        self._open.clear()
        self._observer.clear()

    def adopted(self, uid: str) -> bool:
        """Was ``uid``'s placement adopted (found deployed) rather than made by this term's deploy?"""
        return uid in self._adopted

    def adopt(
        self,
        uid: str,
        ctx: PodContext,
        provider: str,
        *,
        offer_id: str = "",
        price_per_hour: float | None = None,
    ) -> None:
        """Record a pod found already deployed (restart resync) without deploying it."""
        if price_per_hour is None:
            offer = self.catalog.offer(provider, offer_id) if offer_id else None
            price_per_hour = 0.0 if offer is None else offer.price_per_hour
        cost = price_per_hour * (1.0 - self.config.provider(provider).discount)
        self._placed[uid] = (provider, offer_id)
        self._adopted.add(uid)
        self.budgets.commit(uid, ctx.namespace, cost)
        self.spread.add(uid, ctx.workload, provider)
        self._observer.deployed(uid, provider, None)

    def release(self, uid: str) -> None:
        """The pod is gone: free its budget share, spread slot and (optimistically) capacity."""
        placed = self._placed.pop(uid, None)
        self._adopted.discard(uid)
        if placed is not None and placed[1]:
            self.catalog.give_back(*placed)
        self._open.forget(uid)
        self._observer.forget(uid)
        self.budgets.release(uid)
        self.spread.release(uid)

    def observe(self, uid: str, provider: str, status: DeploymentStatus, now: float | None = None) -> None:
        """A status the pod controller recorded for ``uid`` on ``provider`` (any source).

        Feeds the score: the first Running after our deploy is that provider's start-up time; a
        provider-reported preemption or loss counts as a failure (see ``placement/observe.py``)."""
        self._observer.observe(uid, provider, status, self._clock() if now is None else now)

    def placed(self, uid: str) -> tuple[str, str] | None:
        return self._placed.get(uid)

    def placements(self) -> Mapping[str, tuple[str, str]]:
        """Read-only view: uid -> (provider, offer id) of every pod placed and not released."""
        return MappingProxyType(self._placed)

    def summary(self) -> dict[str, Any]:
        """State for the admin API: health, breaker, blocklist, budgets, catalog freshness,
        unsettled creates."""
        return {
            "breaker_open": self.health.breaker_open(),
            "providers": self.health.summary(),
            "stale_catalogs": list(self.catalog.stale()),
            "blocklist": [
                {"provider": e.provider, "gpu_type": e.gpu_type, "region": e.region, "reason": e.reason}
                for e in self.blocklist.entries()
            ],
            "budgets": self.budgets.summary(),
            # UIDs whose create may have reached a provider that could not confirm it yet
            "unsettled_creates": self._open.summary(),
        }
