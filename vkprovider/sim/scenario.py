"""Scenario files: one simulated day of the GPU cluster, validated before anything starts.

A scenario names the local fleet (kwok nodes), the external providers (fakecloud instances), the
inference workloads and a timeline of events at offsets into the day. Times in the file are
*simulated* (``"6h"``, ``"90m"``, ``"1h30m"``; a bare number is hours); ``clock`` compresses the
day into ``real_seconds`` of wall time, and :meth:`Scenario.real` converts. Every error names its
field (``timeline.2.training.duration: must be positive``), including cross-references such as
an event naming an unknown provider, so a typo never starts half a simulation.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    model_validator,
)

NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


class ScenarioError(ValueError):
    """The scenario is invalid; the message names the file and every bad field."""


def parse_duration(value: Any) -> float:
    """``"1h30m"`` / ``"90m"`` / ``"45s"`` / a number of hours → simulated seconds (never negative)."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '6h', '90m' or a number of hours")
    if isinstance(value, int | float):
        seconds = float(value) * 3600.0
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        if text.startswith("-"):
            raise ValueError(f"must not be negative, got {value!r}")
        match = _DURATION.fullmatch(text)
        if not text or match is None:
            raise ValueError(f"expected a duration such as '6h', '90m', '1h30m' or '45s', got {value!r}")
        hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    else:
        raise ValueError("expected a duration such as '6h', '90m' or a number of hours")
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


#: Simulated seconds, written as a duration in the file (and dumped as ``"<seconds>s"``).
SimSeconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(lambda v: f"{v}s", return_type=str, when_used="json"),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Clock(_Strict):
    day: SimSeconds = Field(default=24 * 3600.0, gt=0, description="length of the simulated day")
    real_seconds: float = Field(default=300.0, gt=0, description="wall-clock seconds the day takes")


class Fleet(_Strict):
    """The local GPU nodes (kwok): ``nodes`` x ``gpus_per_node`` of ``gpu_type``."""

    nodes: int = Field(ge=1, le=64)
    gpus_per_node: int = Field(gt=0, le=64)
    gpu_type: str = Field(default="H100-SXM-80GB", min_length=1)
    ready_after: SimSeconds = Field(default=300.0, description="a local replica's start → Ready (model load)")


class ProviderSpec(_Strict):
    """One fakecloud instance selling one shape: ``gpus`` x ``gpu_type`` per instance."""

    name: str = Field(pattern=NAME, max_length=40)
    price_per_hour: float = Field(ge=0, description="per instance")
    capacity: int = Field(ge=0, description="instances it can run at once")
    gpus: int = Field(default=1, ge=1, description="GPUs per instance")
    gpu_type: str | None = Field(default=None, description="default: the fleet's GPU type")
    region: str = "eu-west"
    startup: SimSeconds = Field(default=600.0, description="create → Running (provisioning)")
    ready_after: SimSeconds = Field(default=300.0, description="Running → Ready (model load)")
    failure_rate: float = Field(default=0.0, ge=0, le=1, description="share of API calls failing 503")
    loss_rate: float = Field(default=0.0, ge=0, le=1, description="per status read: deployment vanishes")


class Pdb(_Strict):
    max_unavailable: int | None = Field(default=None, ge=0)
    min_available: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one(self) -> Pdb:
        if (self.max_unavailable is None) == (self.min_available is None):
            raise ValueError("set exactly one of max_unavailable or min_available")
        return self

    def floor(self, replicas: int) -> int:
        """The fewest Ready replicas this budget allows voluntary disruptions to leave."""
        if self.min_available is not None:
            return min(self.min_available, replicas)
        return max(0, replicas - (self.max_unavailable or 0))


class Hpa(_Strict):
    min_replicas: int = Field(ge=1)
    max_replicas: int = Field(ge=1)
    target_cpu_percent: int = Field(default=70, ge=1, le=100)

    @model_validator(mode="after")
    def _band(self) -> Hpa:
        if self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas must be >= min_replicas")
        return self


class Workload(_Strict):
    """An inference Deployment that prefers local nodes and may burst to the virtual node."""

    name: str = Field(pattern=NAME, max_length=40)
    replicas: int = Field(ge=0, le=500)
    gpus: int = Field(default=1, ge=1, description="GPUs per replica")
    pdb: Pdb | None = Pdb(max_unavailable=1)
    hpa: Hpa | None = None


class Training(_Strict):
    """A training Job: ``gpus`` in pods of ``gpus_per_pod``, for ``duration``, at ``priority``."""

    name: str = Field(pattern=NAME, max_length=40)
    gpus: int = Field(gt=0)
    gpus_per_pod: int | None = Field(default=None, gt=0, description="default: one node's GPUs")
    duration: SimSeconds = Field(gt=0)
    priority: int = Field(default=1000, ge=1, le=1_000_000_000, description="above inference (0)")


class CapacityChange(_Strict):
    """From now on the provider runs at most ``capacity`` instances (running ones keep running)."""

    provider: str
    capacity: int = Field(ge=0)


class Outage(_Strict):
    """The provider's API fails every call (503) for ``duration`` (default: the rest of the day)."""

    provider: str
    duration: SimSeconds | None = Field(default=None, gt=0)


class Maintenance(_Strict):
    """Local node ``node`` (index into the fleet) is cordoned for ``duration`` (default: the rest)."""

    node: int = Field(ge=0)
    duration: SimSeconds | None = Field(default=None, gt=0)


class Scale(_Strict):
    workload: str
    replicas: int = Field(ge=0, le=500)


KINDS = ("training", "capacity", "outage", "maintenance", "scale")


class Event(_Strict):
    """One timeline entry: ``at`` plus exactly one of the event kinds."""

    at: SimSeconds
    training: Training | None = None
    capacity: CapacityChange | None = None
    outage: Outage | None = None
    maintenance: Maintenance | None = None
    scale: Scale | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Event:
        present = [k for k in KINDS if getattr(self, k) is not None]
        if len(present) != 1:
            raise ValueError(f"set exactly one of {', '.join(KINDS)} (got {present or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def body(self) -> Training | CapacityChange | Outage | Maintenance | Scale:
        value: Training | CapacityChange | Outage | Maintenance | Scale = getattr(self, self.kind)
        return value


class EvictionCaps(_Strict):
    """The Descheduler's eviction caps per run (the PDBs bound each workload on top)."""

    per_node: int = Field(default=2, ge=1)
    per_namespace: int = Field(default=2, ge=1)
    total: int = Field(default=4, ge=1)


class Runtime(_Strict):
    """Wall-clock knobs of the runner itself (not part of the simulated story)."""

    sample_seconds: float = Field(default=1.0, gt=0, le=10)
    lost_after_seconds: float | None = Field(
        default=None,
        gt=0,
        description="a workload short of Ready replicas longer than this lost them; "
        "default: 10 s + 3 x the slowest startup (provider or local), in real seconds",
    )
    settle_seconds: float = Field(
        default=45.0, ge=0, description="after the day: wait this long for deletions before counting orphans"
    )
    seed: int = 7
    gate: dict[str, Any] = Field(default={}, description="overrides for the service's gate: section")
    descheduler_interval_seconds: float = Field(default=2.0, gt=0)
    descheduler: EvictionCaps = EvictionCaps()


class Scenario(_Strict):
    name: str = Field(pattern=NAME, max_length=40)
    description: str = ""
    namespace: str = Field(default="default", pattern=NAME)
    clock: Clock = Clock()
    fleet: Fleet
    providers: list[ProviderSpec] = Field(min_length=1)
    workloads: list[Workload] = Field(min_length=1)
    timeline: list[Event] = []
    runtime: Runtime = Runtime()

    @property
    def scale(self) -> float:
        """Simulated seconds per real second."""
        return self.clock.day / self.clock.real_seconds

    def real(self, sim_seconds: float) -> float:
        return sim_seconds / self.scale

    def sim(self, real_seconds: float) -> float:
        return real_seconds * self.scale

    @property
    def lost_after(self) -> float:
        """Real seconds a replica may be missing before it counts as lost (startup plus slack for
        scheduling, the gate's dwell and the provider's API)."""
        if self.runtime.lost_after_seconds is not None:
            return self.runtime.lost_after_seconds
        slowest = max([self.fleet.ready_after, *(p.startup + p.ready_after for p in self.providers)])
        return 10.0 + 3.0 * self.real(slowest)

    def provider(self, name: str) -> ProviderSpec:
        return next(p for p in self.providers if p.name == name)

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads if w.name == name)

    def events(self) -> list[Event]:
        """The timeline in time order (stable for events at the same offset)."""
        return sorted(self.timeline, key=lambda e: e.at)

    def trainings(self) -> list[tuple[Event, Training]]:
        return [(e, e.training) for e in self.events() if e.training is not None]

    def gpus_per_pod(self, training: Training) -> int:
        return training.gpus_per_pod or min(training.gpus, self.fleet.gpus_per_node)

    def provider_gpu_type(self, provider: ProviderSpec) -> str:
        return provider.gpu_type or self.fleet.gpu_type


def reference_errors(s: Scenario) -> list[str]:
    """Cross-field checks pydantic cannot express per field; each line names its field."""
    errors: list[str] = []

    def unique(kind: str, names: list[str]) -> None:
        for name in sorted({n for n in names if names.count(n) > 1}):
            errors.append(f"{kind}: duplicate name {name!r}")

    unique("providers", [p.name for p in s.providers])
    unique("workloads", [w.name for w in s.workloads])
    unique("timeline.training", [t.name for _, t in s.trainings()])
    providers = {p.name for p in s.providers}
    total_gpus = s.fleet.nodes * s.fleet.gpus_per_node
    largest_instance = max(p.gpus for p in s.providers)
    for i, w in enumerate(s.workloads):
        if w.gpus > s.fleet.gpus_per_node and w.gpus > largest_instance:
            errors.append(f"workloads.{i}.gpus: {w.gpus} fit neither a local node nor any provider instance")
    for i, event in enumerate(s.timeline):
        field = f"timeline.{i}"
        if event.at > s.clock.day:
            errors.append(f"{field}.at: {event.at / 3600:g}h is after the end of the day")
        body = event.body
        if isinstance(body, CapacityChange | Outage) and body.provider not in providers:
            known = ", ".join(sorted(providers))
            errors.append(
                f"{field}.{event.kind}.provider: unknown provider {body.provider!r} (known: {known})"
            )
        if isinstance(body, Maintenance) and body.node >= s.fleet.nodes:
            errors.append(
                f"{field}.maintenance.node: {body.node} is not a node index (0..{s.fleet.nodes - 1})"
            )
        if isinstance(body, Scale):
            names = [w.name for w in s.workloads]
            if body.workload not in names:
                errors.append(f"{field}.scale.workload: unknown workload {body.workload!r}")
            elif s.workload(body.workload).hpa is not None:
                errors.append(
                    f"{field}.scale.workload: {body.workload!r} has an HPA, which owns its replicas"
                )
        if isinstance(body, Training):
            per_pod = s.gpus_per_pod(body)
            if per_pod > s.fleet.gpus_per_node:
                errors.append(
                    f"{field}.training.gpus_per_pod: {per_pod} exceeds fleet.gpus_per_node "
                    f"({s.fleet.gpus_per_node})"
                )
            if body.gpus % per_pod:
                errors.append(
                    f"{field}.training.gpus: {body.gpus} is not a multiple of gpus_per_pod ({per_pod})"
                )
            if body.gpus > total_gpus:
                errors.append(f"{field}.training.gpus: {body.gpus} exceeds the fleet's {total_gpus} GPUs")
    return errors


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    """Validate ``data``; raise :class:`ScenarioError` listing every bad field."""
    lines = [f"invalid scenario {source}:"]
    if not isinstance(data, dict):
        raise ScenarioError(f"{lines[0]}\n  (root): expected a mapping, got {type(data).__name__}")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            field = ".".join(str(part) for part in err["loc"]) or "(root)"
            message = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"  {field}: {message}")
        raise ScenarioError("\n".join(lines)) from None
    errors = reference_errors(scenario)
    if errors:
        raise ScenarioError("\n".join([*lines, *(f"  {e}" for e in errors)]))
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ScenarioError(f"scenario file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario {path} is not valid YAML: {exc}") from None
    return parse_scenario(data, str(path))
