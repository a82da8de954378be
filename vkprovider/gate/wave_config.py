"""``gate.return_home``: how the gate marks the replicas the Descheduler may bring home.

Its own module (imported by ``vkprovider.gate.config``) so the wave settings stay apart from the
taint's band and dwell.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: The label the shipped Descheduler policy selects on (deploy/descheduler/policy.yaml).
MARK_LABEL = "vkprovider.io/return-home"


class ReturnHomeConfig(BaseModel):
    """Mark exactly the external replicas whose replacements fit locally (dearest first)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True,
        description="plan waves and mark replicas; off: the taint follows the raw free-GPU reading "
        "and no pod is marked (the shipped policy then evicts nothing)",
    )
    mark_label: str = Field(
        default=MARK_LABEL,
        min_length=1,
        max_length=316,
        description='the label (value "true") on the replicas a wave chose; the Descheduler '
        "policy's labelSelector must name the same one",
    )
    come_home_seconds: float = Field(
        default=600.0,
        gt=0,
        description="a replacement not Ready on a local node this long after its replica left "
        "counts as not come home (its slot is released, its workload backs off)",
    )
    backoff_seconds: float = Field(
        default=1800.0,
        ge=0,
        description="how long a workload whose replacement did not come home is not marked",
    )
    require_pdb: bool = Field(
        default=True,
        description="mark only replicas a PodDisruptionBudget covers: the others could all be "
        "evicted in one run (the Descheduler's own PodsWithoutPDB is broken in v0.36, policy.yaml)",
    )
    owner_refresh_seconds: float = Field(
        default=300.0,
        gt=0,
        description="how long a ReplicaSet/StatefulSet template or a namespace's "
        "PodDisruptionBudgets read is reused",
    )
