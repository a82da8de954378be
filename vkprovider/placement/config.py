"""Placement configuration (the ``placement:`` section of the service config).

Every knob has a default that works for a demo with no tuning: no discounts, no budgets, no
spread cap, spot allowed, modest penalties for flaky or slow providers. Money is in the same
currency as the providers' ``price_per_hour``; penalties are expressed in currency per hour so
they add directly to an offer's hourly price.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateLimitConfig(_Section):
    """Client-side token bucket for calls to one provider (offers and deploys)."""

    per_second: float = Field(default=10.0, gt=0)
    burst: int = Field(default=20, ge=1)


class ProviderPlacementConfig(_Section):
    """Per-provider commercial terms and tuning, keyed by provider instance name."""

    discount: float = Field(default=0.0, ge=0, lt=1, description="negotiated discount off list price")
    weight: float = Field(default=1.0, gt=0, description="multiplies the score; >1 disfavours")
    startup_seconds: float | None = Field(
        default=None, ge=0, description="expected start-up latency; default_startup_seconds if unset"
    )
    rate_limit: RateLimitConfig | None = None


class PlacementConfig(_Section):
    # Catalog and failover.
    offer_refresh_seconds: float = Field(default=30.0, gt=0)
    offer_timeout_seconds: float = Field(default=10.0, gt=0)
    blocklist_ttl_seconds: float = Field(default=300.0, ge=0)
    deploy_timeout_seconds: float = Field(default=60.0, gt=0)
    reconcile_timeout_seconds: float = Field(
        default=10.0, gt=0, description="per get/delete that settles an ambiguous create"
    )
    transient_attempts: int = Field(default=3, ge=1, le=10, description="tries per candidate")
    transient_backoff_seconds: float = Field(default=0.5, ge=0)
    transient_max_wait_seconds: float = Field(
        default=10.0, ge=0, description="a longer retry_after skips to the next candidate"
    )
    max_attempts: int = Field(default=5, ge=1, description="candidates tried per deploy")
    max_candidates: int = Field(default=10, ge=1, description="ranked candidates kept per decision")

    # Operator-level constraints; combined with the pod's annotations (both must allow).
    providers_allow: list[str] = Field(default=[], description="empty: every configured provider")
    providers_deny: list[str] = []
    regions_allow: list[str] = []
    regions_deny: list[str] = []
    max_price_per_hour: float | None = Field(default=None, gt=0)
    allow_spot: bool = True

    # Scoring.
    providers: dict[str, ProviderPlacementConfig] = {}
    failure_window_seconds: float = Field(default=600.0, gt=0)
    restart_cost: float = Field(
        default=1.0, ge=0, description="currency/hour added per unit of recent failure/preemption rate"
    )
    default_startup_seconds: float = Field(default=60.0, ge=0)
    startup_cost_per_minute: float = Field(
        default=0.01, ge=0, description="currency/hour added per minute of expected start-up"
    )

    # Health and circuit breaker.
    breaker_seconds: float = Field(default=120.0, gt=0, description="all providers failing this long")
    unreachable_after_failures: int = Field(
        default=2, ge=1, description="probes/refreshes failed in a row before a provider gets no new pods"
    )
    quota_reenable_seconds: float = Field(
        default=300.0, ge=0, description="a probe success re-enables a billing-disabled provider after this"
    )

    # Budgets (discounted spend per hour, per namespace) and spread.
    namespace_budgets: dict[str, NonNegativeFloat] = Field(
        default={}, description="namespace -> max spend per hour"
    )
    default_namespace_budget: float | None = Field(default=None, gt=0)
    spread_max_share: float | None = Field(
        default=None, gt=0, le=1, description="max share of one workload's replicas per provider"
    )

    rate_limit: RateLimitConfig = RateLimitConfig()

    def provider(self, name: str) -> ProviderPlacementConfig:
        return self.providers.get(name) or _DEFAULT_PROVIDER


_DEFAULT_PROVIDER = ProviderPlacementConfig()
