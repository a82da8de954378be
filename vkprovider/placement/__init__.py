"""Price-weighted placement: choose a provider/offer for a pod, fail over, explain the choice.

The pod controller uses :class:`Placer` (``rank`` / ``deploy`` / ``release``, and ``observe`` for
every status its tracker records); the node agent uses ``placer.health`` (``record_probe`` /
``breaker_open``). See docs/placement.md.
"""

from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.health import TAINT_UNAVAILABLE, ProviderHealth
from vkprovider.placement.service import Placer
from vkprovider.placement.types import (
    Attempt,
    Candidate,
    Decision,
    NotPlaced,
    Placement,
    PodContext,
    Rejection,
)

__all__ = [
    "TAINT_UNAVAILABLE",
    "Attempt",
    "Candidate",
    "Decision",
    "NotPlaced",
    "Placement",
    "PlacementConfig",
    "Placer",
    "PodContext",
    "ProviderHealth",
    "Rejection",
]
