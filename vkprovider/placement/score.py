"""Scoring: the effective hourly price of an offer, lower is better.

    score = weight x (list_price x (1 - discount)          # what we actually pay
                      + failure_rate x restart_cost        # expected cost of failures/preemptions
                      + startup_minutes x startup_cost_per_minute)

All terms are currency per hour, so a penalty reads as "this provider's flakiness is worth
0.30/h to us". The provider terms (discount, penalties, weight) are folded once per decision
into ``score = a x price + b`` so each offer costs one multiply-add.

Ties break deterministically on (score, excess GPUs, provider name, offer id): equal inputs give
the same ranking whatever order providers or offers arrived in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vkprovider.models import Offer
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.health import ProviderHealth
from vkprovider.placement.types import Candidate


@dataclass(frozen=True, slots=True)
class ProviderTerms:
    """One provider's scoring terms for the current decision: ``score = a x price + b``."""

    discount: float
    weight: float
    failure_penalty: float
    startup_penalty: float
    a: float = field(init=False)
    b: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", self.weight * (1.0 - self.discount))
        object.__setattr__(self, "b", self.weight * (self.failure_penalty + self.startup_penalty))

    def score(self, price: float) -> float:
        return self.a * price + self.b


def provider_terms(name: str, config: PlacementConfig, health: ProviderHealth) -> ProviderTerms:
    cfg = config.provider(name)
    startup = health.startup_seconds(name)
    if startup is None:
        startup = cfg.startup_seconds if cfg.startup_seconds is not None else config.default_startup_seconds
    return ProviderTerms(
        discount=cfg.discount,
        weight=cfg.weight,
        failure_penalty=health.failure_rate(name) * config.restart_cost,
        startup_penalty=startup / 60.0 * config.startup_cost_per_minute,
    )


def sort_key(score: float, excess: int, provider: str, offer_id: str) -> tuple[float, int, str, str]:
    return (score, excess, provider, offer_id)


def make_candidate(rank: int, offer: Offer, terms: ProviderTerms, gpu_count: int, current: bool) -> Candidate:
    price = offer.price_per_hour
    return Candidate(
        rank=rank,
        offer=offer,
        list_price=price,
        discounted_price=price * (1.0 - terms.discount),
        failure_penalty=terms.failure_penalty,
        startup_penalty=terms.startup_penalty,
        weight=terms.weight,
        score=terms.score(price),
        excess_gpus=offer.gpu_count - gpu_count,
        current=current,
    )
