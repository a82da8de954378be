"""A deployment as the simulated cloud records it, and how it ended.

Plain records with no behaviour: the store (:mod:`.state`) creates and mutates them, the lifecycle
(:mod:`.lifecycle`) reads them against the clock. Keeping them here, below both, is what lets the
lifecycle stay a pure function of a deployment without importing the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from vkprovider.plugins.api import DeploymentRequest, Phase

from .config import CatalogEntry


@dataclass(frozen=True)
class Outcome:
    """How and when a deployment ended (admin verb or natural end of run)."""

    phase: Phase
    reason: str
    message: str
    exit_code: int
    at: float


@dataclass
class Deployment:
    uid: str
    provider_id: str
    request: DeploymentRequest
    labels: dict[str, str]
    offer: CatalogEntry
    created: float
    created_wall: datetime
    ip: str
    run_seconds: float | None
    exit_code: int
    outcome: Outcome | None = None
    #: When an asynchronous delete was accepted: the run stopped then (the ledger closed it as
    #: ``deleted``), so what is still reported is the deployment as it was at that instant.
    removed_at: float | None = None
    extra_logs: list[tuple[float, str, str]] = field(default_factory=list)
