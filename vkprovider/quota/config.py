"""The ``quota:`` section of the config file.

Two shapes. The short one syncs one ClusterQueue's quota in one flavor::

    quota: {cluster_queue: training, flavor: local-gpu, node_selector: {pool: local-gpu}}

The full one names every flavor (a ResourceFlavor: one GPU type, one node label) with the nodes
that back it and the ClusterQueues that share it, each with a ``share`` (a weight: the flavor's
offer is split between its queues in proportion)::

    quota:
      flavors:
        - name: a100
          node_selector: {pool: local-gpu, gpu: a100}
          tolerations: [{key: nvidia.com/gpu, operator: Exists}]
          queues: [{name: training, share: 3}, {name: research, share: 1}]

Both normalise to :meth:`QuotaConfig.targets`; every message names the field it is about.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vkprovider.errors import InvalidRequest
from vkprovider.preflight import FieldProblem
from vkprovider.translate.quantity import parse_quantity

DEFAULT_RESOURCES = ("nvidia.com/gpu", "cpu", "memory")
DEFAULT_FLAVOR = "local-gpu"
DEFAULT_SELECTOR = {"pool": "local-gpu"}
_SHORT_FIELDS = ("cluster_queue", "flavor", "node_selector", "resources", "reserve", "tolerations")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Toleration(_Section):
    """A toleration the flavor's workloads carry (a node tainted with it still counts), in the
    pod's own form; include what the ResourceFlavor's ``spec.tolerations`` adds to them."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""


class QueueShare(_Section):
    name: str = Field(min_length=1, description="a ClusterQueue with quota in this flavor")
    share: int = Field(default=1, ge=0, description="its weight in the split of the flavor's offer")


class FlavorConfig(_Section):
    name: str = Field(min_length=1, description="the ResourceFlavor, as the ClusterQueues name it")
    node_selector: dict[str, str] = Field(min_length=1, description="labels of the nodes behind it")
    resources: list[str] = Field(default=list(DEFAULT_RESOURCES), min_length=1)
    reserve: dict[str, str] = Field(default={}, description="kept out of every queue's quota")
    tolerations: list[Toleration] = Field(default=[], description="what the flavor's workloads tolerate")
    queues: list[QueueShare] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> FlavorConfig:
        problems = _resource_problems(self.resources, self.reserve)
        seen: set[str] = set()
        for i, queue in enumerate(self.queues):
            if queue.name in seen:
                problems.append((f"queues.{i}.name", f"ClusterQueue {queue.name!r} is listed twice"))
            seen.add(queue.name)
        if not any(q.share for q in self.queues):
            problems.append(("queues", "every share is 0: at least one queue must get the offer"))
        if problems:
            raise FieldProblem(problems)
        return self


@dataclass(frozen=True)
class Target:
    """One flavor to keep in sync, and where in the config each part came from (for errors)."""

    flavor: FlavorConfig
    field: str  #: e.g. ``quota.flavors.0`` or ``quota`` (the short form)

    def queue_field(self, index: int) -> str:
        return "quota.cluster_queue" if self.field == "quota" else f"{self.field}.queues.{index}.name"

    @property
    def name_field(self) -> str:
        return "quota.flavor" if self.field == "quota" else f"{self.field}.name"

    @property
    def resources_field(self) -> str:
        return f"{self.field}.resources"

    def reserve(self) -> dict[str, Decimal]:
        return {name: parse_quantity(v, name) for name, v in self.flavor.reserve.items()}


class QuotaConfig(_Section):
    """Which flavors of which ClusterQueues to keep equal to what the healthy nodes offer.

    Read by ``vkprovider quota`` and, when the section is present, by ``vkprovider serve``,
    which then runs the sync on its leader (the service's Lease)."""

    cluster_queue: str | None = Field(default=None, min_length=1, description="short form: the one queue")
    flavor: str = Field(default=DEFAULT_FLAVOR, min_length=1, description="short form: its flavor")
    node_selector: dict[str, str] = Field(default=dict(DEFAULT_SELECTOR), min_length=1)
    resources: list[str] = Field(default=list(DEFAULT_RESOURCES), min_length=1)
    reserve: dict[str, str] = Field(default={}, description="short form: kept out of the quota")
    tolerations: list[Toleration] = Field(default=[], description="short form: the workloads' tolerations")
    flavors: list[FlavorConfig] = Field(default=[], description="the full form: flavors and their queues")
    maintenance_taints: list[str] = Field(
        default=["node.kubernetes.io/maintenance"],
        description="taint keys that take a node out whatever its workloads tolerate",
    )
    hold: bool = Field(default=True, description="stopPolicy Hold while usage exceeds the offer")
    interval_seconds: float = Field(default=10.0, gt=0, description="at most this long between syncs")
    dry_run: bool = Field(default=False, description="compute and log the change, write nothing")

    @model_validator(mode="after")
    def _one_shape(self) -> QuotaConfig:
        short = [f for f in _SHORT_FIELDS if f in self.model_fields_set]
        if self.flavors and short:
            raise FieldProblem(
                [
                    (f, "set either the short form (cluster_queue, flavor, …) or flavors, not both")
                    for f in short
                ]
            )
        if not self.flavors and self.cluster_queue is None:
            raise FieldProblem.one("cluster_queue", "Field required (or list flavors: with their queues)")
        problems = [] if self.flavors else _resource_problems(self.resources, self.reserve)
        names: set[str] = set()
        for i, flavor in enumerate(self.flavors):
            if flavor.name in names:
                problems.append((f"flavors.{i}.name", f"flavor {flavor.name!r} is listed twice"))
            names.add(flavor.name)
        if problems:
            raise FieldProblem(problems)
        return self

    def targets(self) -> list[Target]:
        if self.flavors:
            return [Target(f, f"quota.flavors.{i}") for i, f in enumerate(self.flavors)]
        assert self.cluster_queue is not None
        flavor = FlavorConfig(
            name=self.flavor,
            node_selector=self.node_selector,
            resources=self.resources,
            reserve=self.reserve,
            tolerations=self.tolerations,
            queues=[QueueShare(name=self.cluster_queue)],
        )
        return [Target(flavor, "quota")]

    def queue_names(self) -> list[str]:
        """Every configured ClusterQueue, once, in config order."""
        return list(dict.fromkeys(q.name for t in self.targets() for q in t.flavor.queues))

    def lease_suffix(self) -> str:
        """The standalone sync's Lease is ``vkprovider-quota-<this>``: the short form's queue,
        else the first queue (one Lease per sync configuration)."""
        return self.queue_names()[0]

    @field_validator("maintenance_taints")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        for key in value:
            if not key:
                raise ValueError("an empty taint key")
        return value


def _resource_problems(resources: list[str], reserve: dict[str, str]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if len(set(resources)) != len(resources):
        problems.append(("resources", "a resource is listed twice"))
    for name, amount in reserve.items():
        if name not in resources:
            problems.append((f"reserve.{name}", f"not a synced resource (resources: {', '.join(resources)})"))
            continue
        try:
            if parse_quantity(amount, name) < 0:
                problems.append((f"reserve.{name}", "must not be negative"))
        except InvalidRequest as exc:
            problems.append((f"reserve.{name}", str(exc)))
    return problems
