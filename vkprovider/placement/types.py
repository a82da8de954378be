"""The data placement hands out: candidates, decisions, placements, and what it needs of a pod.

Plain frozen dataclasses (not pydantic): they are built on the hot path of every decision.
``PlacementTarget`` is the slice of the provider contract placement uses; every
``vkprovider.plugins.api.Provider`` satisfies it structurally (placement sits beside the plugin
package in the layering, so it does not import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from vkprovider.errors import Unschedulable
from vkprovider.models import DeploymentRequest, DeploymentStatus, Offer, ProviderInfo


class PlacementTarget(Protocol):
    """What placement calls on a provider: its identity (declared API rate limit), catalog,
    deploy, and the get/delete that settle an ambiguous create."""

    @property
    def name(self) -> str: ...

    async def info(self) -> ProviderInfo: ...

    async def offers(self) -> list[Offer]: ...

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus: ...

    async def get(self, uid: str) -> DeploymentStatus: ...

    async def delete(self, uid: str) -> bool | None: ...


@dataclass(frozen=True)
class PodContext:
    """What placement needs to know about the pod beyond the translated request."""

    namespace: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    workload: str | None = None  # owner reference UID, for spread
    current_provider: str | None = None  # already deployed there (hysteresis): keep it
    current_offer: str | None = None  # its offer id, if known


@dataclass(slots=True)
class Candidate:
    """One feasible offer and how its score was made (lower score is better).

    Read-only by convention (not ``frozen``: up to ``max_candidates`` are built per decision,
    and frozen dataclasses are several times slower to construct)."""

    rank: int
    offer: Offer
    list_price: float
    discounted_price: float  # list x (1 - discount): what the namespace budget is charged
    failure_penalty: float  # recent failure/preemption rate x restart cost
    startup_penalty: float  # expected start-up minutes x cost per minute
    weight: float
    score: float  # weight x (discounted + failure + startup): the effective price
    excess_gpus: int
    current: bool = False  # the pod already runs here (hysteresis)

    @property
    def provider(self) -> str:
        return self.offer.provider

    @property
    def penalties(self) -> float:
        return self.failure_penalty + self.startup_penalty


@dataclass(frozen=True, slots=True)
class Rejection:
    provider: str
    offer_id: str
    gpu_type: str
    region: str
    price: float
    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class Attempt:
    provider: str
    offer_id: str
    outcome: str  # "ok" or an error code (NoCapacity, Transient, QuotaOrBilling, ...)
    message: str = ""


@dataclass(frozen=True)
class Decision:
    """The ranked candidates for one pod, and why everything else was filtered out."""

    uid: str
    candidates: tuple[Candidate, ...]
    rejected_counts: Mapping[str, int]  # filter code -> offers rejected
    feasible: int  # offers passing every filter (candidates keep the best per provider/GPU/region)
    total_offers: int
    rejections: tuple[Rejection, ...] = ()  # per offer; only with rank(detail=True)
    stale: tuple[str, ...] = ()  # providers whose catalog is stale (last refresh failed)
    chosen: Candidate | None = None  # set by deploy to the candidate that took the pod
    attempts: tuple[Attempt, ...] = ()
    unevaluated: int = 0  # offers skipped unchecked: priced out of the top max_candidates

    @property
    def best(self) -> Candidate | None:
        return self.chosen or (self.candidates[0] if self.candidates else None)


@dataclass(frozen=True)
class Placement:
    """A successful deploy: where, at what offer, the provider's status, and how we got there."""

    provider: str
    offer: Offer
    status: DeploymentStatus
    decision: Decision
    warnings: list[tuple[str, str]]  # (Event reason, message) for Warning Events


class NotPlaced(Unschedulable):
    """No candidate took the pod; carries the decision and warnings for Events/annotations."""

    def __init__(self, message: str, *, reason: str, decision: Decision, warnings: list[tuple[str, str]]):
        super().__init__(message, reason=reason)
        self.decision = decision
        self.warnings = warnings
