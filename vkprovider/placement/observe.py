"""What the pod controller sees of a deployment, fed back into the score (DESIGN §5.2).

The score charges a provider for its expected start-up time and its recent failure rate; both
come from here, derived from the statuses the tracker records (deploy answers, gets, pushes and
lists alike), one transition at a time:

* the first ``Running`` after a deploy this process made: seconds since the deploy answered
  → ``ProviderHealth.record_startup`` (smoothed per provider);
* ``Failed`` with a preemption reason the provider reports (``Preempted``, ``SpotInterrupted``,
  …) → ``record_preemption``: the provider took the pod away, not the container;
* ``Unknown`` (the provider lost the deployment) → ``record_preemption`` as well.

Each is counted once per deployment, on the transition. A container exiting (``Error``,
``Completed``) says nothing about the provider and is not counted. Only UIDs placed or adopted by
this Placer are followed, and their entries go with :meth:`Observer.forget` (the pod's release),
so nothing grows with pods that are gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from vkprovider.models import DeploymentStatus, Phase
from vkprovider.placement.health import ProviderHealth

#: Reasons with which providers report that they took a deployment away (case-insensitive).
PREEMPTION_REASONS = frozenset(
    r.lower()
    for r in (
        "Preempted",
        "Preemption",
        "SpotInterrupted",
        "SpotInterruption",
        "SpotReclaimed",
        "Interrupted",
        "HostMaintenance",
        "NodeLost",
        "DeploymentLost",
    )
)


def is_preemption(status: DeploymentStatus) -> bool:
    """The provider, not the workload, ended this deployment."""
    if status.phase is Phase.UNKNOWN:
        return True
    return status.phase is Phase.FAILED and status.reason.lower() in PREEMPTION_REASONS


@dataclass(slots=True)
class _Followed:
    provider: str
    deployed_at: float | None  # None: adopted, the deploy time is not ours to know
    phase: Phase | None = None


class Observer:
    def __init__(self, health: ProviderHealth) -> None:
        self._health = health
        self._followed: dict[str, _Followed] = {}

    def deployed(self, uid: str, provider: str, now: float | None) -> None:
        """A deploy answered (``now``) or a running deployment was adopted (``None``)."""
        self._followed[uid] = _Followed(provider, now)

    def forget(self, uid: str) -> None:
        self._followed.pop(uid, None)

    def clear(self) -> None:
        """A new term: pods are followed again once adopted or deployed."""
        self._followed.clear()

    def __len__(self) -> int:
        return len(self._followed)

    def observe(self, uid: str, provider: str, status: DeploymentStatus, now: float) -> None:
        followed = self._followed.get(uid)
        if followed is None or followed.provider != provider or followed.phase is status.phase:
            return  # not ours, a stray on another provider, or no transition
        followed.phase = status.phase
        if status.phase is Phase.RUNNING and followed.deployed_at is not None:
            self._health.record_startup(provider, max(0.0, now - followed.deployed_at))
            followed.deployed_at = None  # the first Running only
        elif is_preemption(status):
            self._health.record_preemption(provider)
