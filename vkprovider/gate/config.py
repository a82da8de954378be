"""The ``gate:`` section: which signal to read, the band, the dwell, and the taint it owns.

Bad values stop start-up with a message naming the field (``gate.untaint_below_free_gpus: …``),
because a gate that silently runs with an inverted band would flap the virtual node.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vkprovider.gate.prom_queries import DCGM_QUERY as DCGM_QUERY
from vkprovider.gate.prom_queries import FRESHNESS_OF
from vkprovider.gate.prom_queries import KSM_QUERY as KSM_QUERY
from vkprovider.gate.wave_config import ReturnHomeConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaintConfig(_Section):
    """The one taint the gate owns. ``NoExecute`` is refused: it would evict every external pod
    at once, the failure the gradual return (descheduler + PDB) exists to prevent.
    ``PreferNoSchedule`` is refused too: the Descheduler's taint plugin ignores it."""

    key: str = Field(default="local-capacity", min_length=1, max_length=316)
    value: str = Field(default="available", max_length=63)
    effect: str = "NoSchedule"

    @field_validator("effect")
    @classmethod
    def _never_no_execute(cls, effect: str) -> str:
        if effect == "NoExecute":
            raise ValueError(
                "NoExecute would evict every pod on the virtual node at once; use NoSchedule "
                "(the descheduler brings pods home gradually)"
            )
        if effect == "PreferNoSchedule":
            raise ValueError(
                "PreferNoSchedule is ignored by the Descheduler's RemovePodsViolatingNodeTaints "
                "(it evicts only for NoSchedule), so nothing would come home; use NoSchedule"
            )
        if effect != "NoSchedule":
            raise ValueError(f"unknown taint effect {effect!r}; use NoSchedule")
        return effect

    def as_taint(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


class Toleration(_Section):
    """A toleration the inference pods carry (so a node tainted with it still counts as local)."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""


class KubeSignalConfig(_Section):
    node_selector: str = Field(default="pool=local-gpu", min_length=1)
    gpu_resource: str = "nvidia.com/gpu"
    tolerations: list[Toleration] = Field(
        default=[], description="tolerations of the inference pods: nodes tainted with these still count"
    )


class PrometheusSignalConfig(_Section):
    """One instant query for the free GPUs, and one for how old its inputs are
    (``vkprovider/gate/prom_queries.py`` says why the result's own timestamp cannot tell)."""

    url: str = Field(default="http://127.0.0.1:9090", pattern=r"^https?://")
    query: str = Field(default=KSM_QUERY, min_length=1)
    freshness_query: str | None = Field(
        default=None,
        description="seconds since the newest input sample; unset: the built-in query's own, "
        "none for a custom query; empty: no freshness check",
    )
    timeout_seconds: float = Field(default=5.0, gt=0)
    max_sample_age_seconds: float = Field(
        default=120.0, gt=0, description="older inputs count as stale, so as 'signal unavailable'"
    )

    @property
    def freshness(self) -> str:
        """The freshness query in effect ('' for none)."""
        if self.freshness_query is not None:
            return self.freshness_query
        return FRESHNESS_OF.get(self.query, "")


class SignalConfig(_Section):
    kind: str = "kube"
    kube: KubeSignalConfig = KubeSignalConfig()
    prometheus: PrometheusSignalConfig = PrometheusSignalConfig()

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in ("kube", "prometheus"):
            raise ValueError(f"unknown signal kind {kind!r}; use 'kube' or 'prometheus'")
        return kind


class GateConfig(_Section):
    """Taint the virtual node while local GPUs are free; remove the taint when they are gone."""

    signal: SignalConfig = SignalConfig()
    taint: TaintConfig = TaintConfig()
    taint_at_free_gpus: int = Field(default=2, ge=1)
    untaint_below_free_gpus: int = Field(default=1, ge=0)
    dwell_seconds: float = Field(default=60.0, ge=0)
    min_flip_interval_seconds: float = Field(default=30.0, ge=0)
    interval_seconds: float = Field(default=5.0, gt=0)
    signal_timeout_seconds: float = Field(default=120.0, gt=0)
    untaint_on_pending: bool = Field(
        default=True,
        description="untaint at once while pods that tolerate the virtual node are unschedulable",
    )
    pending_hold_max_seconds: float = Field(
        default=300.0,
        gt=0,
        description="one Pending pod holds the taint off at most this long; then it is ignored "
        "(with an Event naming it)",
    )
    identity: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="who owns the node's taint (its heartbeat's owner); unset: the leader-election "
        "Lease when enabled, else <host>/serve or <host>/gate",
    )
    dry_run: bool = False
    return_home: ReturnHomeConfig = ReturnHomeConfig()

    @model_validator(mode="after")
    def _band(self) -> GateConfig:
        if self.untaint_below_free_gpus > self.taint_at_free_gpus:
            raise ValueError(
                f"untaint_below_free_gpus ({self.untaint_below_free_gpus}) must not exceed "
                f"taint_at_free_gpus ({self.taint_at_free_gpus}): the band is inverted"
            )
        return self
