"""The Placer: the one object the pod controller calls to place, and later release, a pod.

``rank`` is pure and fast (reads cached catalogs and state, never does I/O). ``deploy`` ranks,
then tries candidates in order, reacting to each error class the way DESIGN.md §5 says:

* ``NoCapacity``     -> blocklist (provider, GPU type, region) for a TTL; next candidate at once;
* ``Transient``      -> retry the same provider with backoff honouring ``retry_after``
  (a ``retry_after`` beyond ``transient_max_wait_seconds`` moves on instead of blocking);
  after ``transient_attempts`` tries, the next candidate;
* ``QuotaOrBilling`` -> disable the provider (Warning), next candidate;
* ``InvalidRequest`` -> raised at once: the pod fails with its message;
* nothing worked     -> :class:`NotPlaced` (an ``Unschedulable``): the pod stays Pending and
  the caller retries with backoff. Its ``reason`` is ``NoCandidates``, ``BudgetExceeded``,
  ``CircuitOpen`` or ``AllProvidersFailed``.

An unexpected exception from an adapter is a contract violation; it is treated as ``Transient``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from vkprovider.errors import InvalidRequest, NoCapacity, ProviderError, QuotaOrBilling, Transient
from vkprovider.models import DeploymentRequest, DeploymentStatus
from vkprovider.placement.blocklist import Blocklist, block_key
from vkprovider.placement.budget import Budgets
from vkprovider.placement.catalog import Catalog
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.constraints import effective_need, parse_constraints
from vkprovider.placement.explain import no_candidates_message
from vkprovider.placement.health import ProviderHealth
from vkprovider.placement.rank import RankInputs, rank_offers
from vkprovider.placement.ratelimit import RateLimiters
from vkprovider.placement.retry import transient_retry
from vkprovider.placement.score import ProviderTerms, provider_terms
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
    ) -> None:
        self.config = cfg = config or PlacementConfig()
        self.providers = dict(providers)
        self._clock = clock
        self._sleep = sleep
        self.health = ProviderHealth(
            self.providers,
            breaker_seconds=cfg.breaker_seconds,
            failure_window_seconds=cfg.failure_window_seconds,
            quota_reenable_seconds=cfg.quota_reenable_seconds,
            clock=clock,
        )
        self.blocklist = Blocklist(cfg.blocklist_ttl_seconds, clock=clock)
        self.limiters = RateLimiters(
            cfg.rate_limit, {n: c.rate_limit for n, c in cfg.providers.items()}, clock=clock, sleep=sleep
        )
        self.catalog = Catalog(
            self.providers,
            refresh_seconds=cfg.offer_refresh_seconds,
            timeout_seconds=cfg.offer_timeout_seconds,
            limiters=self.limiters,
            clock=clock,
        )
        self.budgets = Budgets(cfg.namespace_budgets, cfg.default_namespace_budget)
        self.spread = Spread()
        self._placed: dict[str, tuple[str, str]] = {}  # uid -> (provider, offer id)
        self._terms: dict[str, ProviderTerms] = {}
        self._terms_key: tuple[int, int] = (-1, -1)

    # Catalog ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Keep every provider's catalog fresh until cancelled."""
        await self.catalog.run()

    async def refresh(self) -> dict[str, bool]:
        """Refresh every provider's catalog now (at start-up and in tests)."""
        return await self.catalog.refresh_all()

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
        decision = self.rank(request, ctx)
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
        for cand in decision.candidates:
            if len(attempts) >= self.config.max_attempts:
                break
            offer, name = cand.offer, cand.provider
            if not cand.current and (
                self.health.disabled(name)
                or self.blocklist.is_blocked(block_key(name, offer.gpu_type, offer.region))
            ):
                continue  # disabled/blocklisted by an earlier attempt of this very deploy
            placed = request.model_copy(
                update={
                    "offer_id": offer.offer_id,
                    "region": offer.region or None,
                    "spot": offer.spot,
                    "gpu_type": offer.gpu_type,
                }
            )
            try:
                status = await self._deploy_with_retry(name, placed)
            except InvalidRequest:
                raise
            except NoCapacity as exc:
                self.blocklist.add(name, offer.gpu_type, offer.region, exc.message)
                attempts.append(Attempt(name, offer.offer_id, "NoCapacity", exc.message))
                warnings.append(
                    ("ProviderNoCapacity", f"{name}/{offer.offer_id}: {exc.message}; trying next")
                )
            except QuotaOrBilling as exc:
                self.health.disable(name, exc.message)
                attempts.append(Attempt(name, offer.offer_id, "QuotaOrBilling", exc.message))
                warnings.append(("ProviderDisabled", f"{name} disabled (quota or billing): {exc.message}"))
            except ProviderError as exc:
                self.health.record_call(name, False)
                attempts.append(Attempt(name, offer.offer_id, exc.code, exc.message))
                warnings.append(("ProviderCreateFailed", f"{name}/{offer.offer_id}: {exc.message}"))
            else:
                self.health.record_call(name, True)
                self._commit(request.uid, ctx, cand)
                attempts.append(Attempt(name, offer.offer_id, "ok"))
                final = replace(decision, chosen=cand, attempts=tuple(attempts))
                return Placement(name, offer, status, final, warnings)
        final = replace(decision, attempts=tuple(attempts))
        tried = "; ".join(f"{a.provider}/{a.offer_id}: {a.outcome}" for a in attempts) or "none usable"
        raise NotPlaced(
            f"all candidates failed ({tried})", reason="AllProvidersFailed", decision=final, warnings=warnings
        )

    async def _deploy_with_retry(self, name: str, request: DeploymentRequest) -> DeploymentStatus:
        cfg = self.config
        retrying = transient_retry(
            cfg.transient_attempts, cfg.transient_backoff_seconds, cfg.transient_max_wait_seconds, self._sleep
        )
        async for attempt in retrying:
            with attempt:
                await self.limiters.acquire(name)
                return await self._call_deploy(name, request)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    async def _call_deploy(self, name: str, request: DeploymentRequest) -> DeploymentStatus:
        try:
            async with asyncio.timeout(self.config.deploy_timeout_seconds):
                return await self.providers[name].deploy(request)
        except ProviderError:
            raise
        except TimeoutError:
            raise Transient("deploy timed out", provider=name) from None
        except Exception as exc:  # contract violation: adapters must raise the error classes
            log.exception("adapter raised an unclassified error", extra={"provider": name})
            raise Transient(f"unexpected {type(exc).__name__}: {exc}", provider=name) from exc

    # Bookkeeping --------------------------------------------------------------------------
    def _commit(self, uid: str, ctx: PodContext, cand: Candidate) -> None:
        key = (cand.provider, cand.offer.offer_id)
        previous = self._placed.get(uid)
        if previous != key:
            if previous is not None:
                self.catalog.give_back(*previous)
            if not cand.current:  # a pod already running there holds its capacity
                self.catalog.take(*key)
        self._placed[uid] = key
        self.budgets.commit(uid, ctx.namespace, cand.discounted_price)
        self.spread.add(uid, ctx.workload, cand.provider)

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
        self.budgets.commit(uid, ctx.namespace, cost)
        self.spread.add(uid, ctx.workload, provider)

    def release(self, uid: str) -> None:
        """The pod is gone: free its budget share, spread slot and (optimistically) capacity."""
        placed = self._placed.pop(uid, None)
        if placed is not None and placed[1]:
            self.catalog.give_back(*placed)
        self.budgets.release(uid)
        self.spread.release(uid)

    def placed(self, uid: str) -> tuple[str, str] | None:
        return self._placed.get(uid)

    def placements(self) -> Mapping[str, tuple[str, str]]:
        """Read-only view: uid -> (provider, offer id) of every pod placed and not released."""
        return MappingProxyType(self._placed)

    def summary(self) -> dict[str, Any]:
        """State for the admin API: health, breaker, blocklist, budgets, catalog freshness."""
        return {
            "breaker_open": self.health.breaker_open(),
            "providers": self.health.summary(),
            "stale_catalogs": list(self.catalog.stale()),
            "blocklist": [
                {"provider": e.provider, "gpu_type": e.gpu_type, "region": e.region, "reason": e.reason}
                for e in self.blocklist.entries()
            ],
            "budgets": self.budgets.summary(),
        }
