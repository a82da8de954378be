"""One candidate's deploy call: the retry policy, the reaction to each error class, and the
settling of an ambiguous create (DESIGN §5.4).

* ``NoCapacity``     -> blocklist (provider, GPU type, region) for a TTL; next candidate at once;
* ``Transient``      -> retry the same provider with backoff honouring ``retry_after`` (see
  ``retry``); then settle whether it was created anyway (see ``ambiguous``): adopt it, or the
  next candidate, or ``Unsettled`` when the provider cannot tell;
* ``QuotaOrBilling`` -> disable the provider (Warning), next candidate;
* ``InvalidRequest`` (and its ``Unsupported``) -> this provider refused the request: next
  candidate (skipping the provider's other offers); the pod fails only when every candidate
  tried refused it (:func:`refused_everywhere`). One plugin's version skew (gRPC
  ``UNIMPLEMENTED``) or one cloud's stricter validation must not fail pods another provider
  would run.

An unexpected exception from an adapter is a contract violation; it is treated as ``Transient``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from vkprovider.errors import InvalidRequest, NoCapacity, ProviderError, Transient
from vkprovider.models import DeploymentRequest, DeploymentStatus, Offer
from vkprovider.placement.ambiguous import DEFINITE_REFUSALS, OpenCreates
from vkprovider.placement.blocklist import Blocklist
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.health import ProviderHealth
from vkprovider.placement.ratelimit import RateLimiters
from vkprovider.placement.retry import TransientRetry
from vkprovider.placement.types import Attempt, PlacementTarget

log = logging.getLogger(__name__)

ADOPTED = "adopted"  # an attempt's message when an ambiguous create turned out to have worked


@dataclass(frozen=True, slots=True)
class Outcome:
    status: DeploymentStatus | None  # placed, or None: try the next candidate
    attempt: Attempt
    warning: tuple[str, str] | None  # (Event reason, message) for a Warning Event
    adopted: bool = False  # an ambiguous create had worked: the deployment is not fresh
    refused: InvalidRequest | None = None  # the provider refused the request itself


def refused_everywhere(refusals: list[tuple[str, InvalidRequest]]) -> InvalidRequest:
    """The error that fails a pod every candidate refused: the one refusal as it was, or one
    naming each provider's (its class and reason kept when they all agree)."""
    if len(refusals) == 1:
        return refusals[0][1]
    errors = [exc for _, exc in refusals]
    kinds = {type(exc) for exc in errors}
    reasons = {exc.reason for exc in errors}
    cls = kinds.pop() if len(kinds) == 1 else InvalidRequest
    each = "; ".join(f"{name}: {exc.message}" for name, exc in refusals)
    return cls(
        f"every candidate refused the pod ({each})", reason=reasons.pop() if len(reasons) == 1 else None
    )


class Failover:
    def __init__(
        self,
        providers: Mapping[str, PlacementTarget],
        config: PlacementConfig,
        *,
        health: ProviderHealth,
        blocklist: Blocklist,
        limiters: RateLimiters,
        open_creates: OpenCreates,
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self._providers = providers
        self._config = config
        self._health = health
        self._blocklist = blocklist
        self._limiters = limiters
        self._open = open_creates
        self._sleep = sleep

    async def call(self, name: str, offer: Offer, request: DeploymentRequest) -> Outcome:
        """Deploy ``request`` on ``name`` with ``offer``; react to the error class.

        The create is an open question until its answer settles it (see ``ambiguous``); raises
        ``Unsettled`` (retry the pod later); a refusal (``InvalidRequest``) is ``Outcome.refused``."""
        uid, oid = request.uid, offer.offer_id
        placed = request.model_copy(
            update={
                "offer_id": oid,
                "region": offer.region or None,
                "spot": offer.spot,
                "gpu_type": offer.gpu_type,
            }
        )
        self._open.open(uid, name)  # stays open if we are cancelled mid-call
        tries: list[int] = [0]
        try:
            status = await self._deploy_with_retry(name, placed, tries)
        except DEFINITE_REFUSALS as exc:
            if tries[0] > 1:  # an earlier try of this call was ambiguous: it may have created it
                settled = await self._open.settle(uid, name, keep_live=not isinstance(exc, InvalidRequest))
                if settled.status is not None:
                    attempt = Attempt(name, oid, "ok", f"{ADOPTED} after {exc.code}: {exc.message}")
                    return Outcome(settled.status, attempt, None, adopted=True)
            self._open.close(uid, name)
            if isinstance(exc, InvalidRequest):
                warning = ("ProviderRefused", f"{name}/{oid}: {exc.message}; trying next")
                return Outcome(None, Attempt(name, oid, exc.code, exc.message), warning, refused=exc)
            if isinstance(exc, NoCapacity):
                self._blocklist.add(name, offer.gpu_type, offer.region, exc.message)
                warning = ("ProviderNoCapacity", f"{name}/{oid}: {exc.message}; trying next")
            else:
                self._health.disable(name, exc.message)
                warning = ("ProviderDisabled", f"{name} disabled (quota or billing): {exc.message}")
            return Outcome(None, Attempt(name, oid, exc.code, exc.message), warning)
        except ProviderError as exc:  # ambiguous: it may have been created anyway
            self._health.record_call(name, False)
            settled = await self._open.settle(uid, name)  # Unsettled: retry the pod later
            if settled.status is not None:
                log.warning(
                    "deploy of %s answered %s but created it: adopting it",
                    uid,
                    exc.code,
                    extra={"provider": name, "uid": uid},
                )
                attempt = Attempt(name, oid, "ok", f"{ADOPTED} after {exc.code}: {exc.message}")
                return Outcome(settled.status, attempt, None, adopted=True)
            warning = ("ProviderCreateFailed", f"{name}/{oid}: {exc.message}")
            return Outcome(None, Attempt(name, oid, exc.code, exc.message), warning)
        self._open.close(uid, name)
        self._health.record_call(name, True)
        return Outcome(status, Attempt(name, oid, "ok"), None)

    async def _deploy_with_retry(
        self, name: str, request: DeploymentRequest, tries: list[int]
    ) -> DeploymentStatus:
        """Deploy with the transient retry policy; ``tries[0]`` counts the calls made."""
        cfg = self._config
        policy = TransientRetry(
            cfg.transient_attempts, cfg.transient_backoff_seconds, cfg.transient_max_wait_seconds, self._sleep
        )

        async def once() -> DeploymentStatus:
            await self._limiters.acquire(name)
            tries[0] += 1
            return await self._call_deploy(name, request)

        return await policy.run(once)

    async def _call_deploy(self, name: str, request: DeploymentRequest) -> DeploymentStatus:
        try:
            async with asyncio.timeout(self._config.deploy_timeout_seconds):
                return await self._providers[name].deploy(request)
        except ProviderError:
            raise
        except TimeoutError:
            raise Transient("deploy timed out", provider=name) from None
        except Exception as exc:  # contract violation: adapters must raise the error classes
            log.exception("adapter raised an unclassified error", extra={"provider": name})
            raise Transient(f"unexpected {type(exc).__name__}: {exc}", provider=name) from exc
