"""Scenario files: one simulated day of the GPU cluster, validated before anything starts.

A scenario names the local fleet (kwok nodes), the external providers (fakecloud instances), the
inference workloads and a timeline of events at offsets into the day. Times in the file are
*simulated* (``"6h"``, ``"90m"``, ``"1h30m"``; a bare number is hours); ``clock`` compresses the
day into ``real_seconds`` of wall time, and :meth:`Scenario.real` converts. Every error names its
field (``timeline.2.training.duration: must be positive``), including cross-references such as
an event naming an unknown provider, so a typo never starts half a simulation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from vkprovider.sim.scenario_parts import (
    KINDS,
    MAX_TOTAL_RPS,
    NAME,
    CapacityChange,
    Clock,
    Event,
    Fleet,
    Hpa,
    LoadCurve,
    LoadPoint,
    Maintenance,
    Outage,
    Pdb,
    ProviderSpec,
    Scale,
    ScenarioError,
    SimSeconds,
    Strict,
    Training,
    TrainingSubmission,
    Workload,
    parse_duration,
)

__all__ = [
    "KINDS",
    "NAME",
    "CapacityChange",
    "Clock",
    "Event",
    "Fleet",
    "Hpa",
    "LoadPoint",
    "Maintenance",
    "Outage",
    "Pdb",
    "ProviderSpec",
    "Runtime",
    "Scale",
    "Scenario",
    "ScenarioError",
    "SimSeconds",
    "Training",
    "TrainingSubmission",
    "Workload",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
    "reference_errors",
]


class Runtime(Strict):
    """Wall-clock knobs of the runner itself (not part of the simulated story)."""

    sample_seconds: float = Field(default=1.0, gt=0, le=10)
    lost_after_seconds: float | None = Field(
        default=None,
        gt=0,
        description="a workload short of Ready replicas longer than this lost them; "
        "default: the slowest start-up (provider or local) + 2 samples + the gate's dwell + 1 s, in real seconds",
    )
    settle_seconds: float = Field(
        default=45.0, ge=0, description="after the day: wait this long for deletions before counting orphans"
    )
    seed: int = 7
    gate: dict[str, Any] = Field(default={}, description="overrides for the service's gate: section")
    descheduler_interval_seconds: float = Field(
        default=2.0, gt=0, description="the shipped policy (deploy/descheduler/policy.yaml) runs this often"
    )


class Scenario(Strict):
    name: str = Field(pattern=NAME, max_length=40)
    description: str = ""
    namespace: str = Field(default="default", pattern=NAME)
    clock: Clock = Clock()
    fleet: Fleet
    providers: list[ProviderSpec] = Field(min_length=1)
    workloads: list[Workload] = Field(min_length=1)
    training: TrainingSubmission = TrainingSubmission()
    timeline: list[Event] = []
    load: LoadCurve = Field(default=[], description="CPU cores per external replica over the day")
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
    def startup_seconds(self) -> float:
        """Real seconds the slowest way back to Ready takes: a local start or a provider's
        provisioning plus model load (a preempted replica may take either)."""
        slowest = max([self.fleet.ready_after, *(p.startup + p.ready_after for p in self.providers)])
        return self.real(slowest)

    @property
    def slack_seconds(self) -> float:
        """Real seconds of control-loop latency on top of a start-up: two samples, the gate's
        dwell (it must see the GPUs gone before it untaints) and one status poll (1 s)."""
        dwell = float(self.runtime.gate.get("dwell_seconds", 3.0))
        return 2 * self.runtime.sample_seconds + dwell + 1.0

    @property
    def excuse_seconds(self) -> float:
        """How long after a disruption a workload it touched may be below its PDB floor: one
        start-up plus the slack (real seconds)."""
        return self.startup_seconds + self.slack_seconds

    @property
    def lost_after(self) -> float:
        """Real seconds a replica may be missing before it counts as lost (default: the excuse
        window)."""
        if self.runtime.lost_after_seconds is not None:
            return self.runtime.lost_after_seconds
        return self.excuse_seconds

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
    for i, w in enumerate(s.workloads):
        smallest = w.hpa.min_replicas if w.hpa else w.replicas
        if w.pdb is not None and w.pdb.min_available is not None and w.pdb.min_available > smallest:
            what = "hpa.min_replicas" if w.hpa else "replicas"
            errors.append(
                f"workloads.{i}.pdb.min_available: {w.pdb.min_available} exceeds {what} ({smallest}): "
                "no replica could ever be disrupted"
            )
    total_rate = sum(w.requests_per_second for w in s.workloads)
    if total_rate > MAX_TOTAL_RPS:
        errors.append(
            f"workloads.requests_per_second: {total_rate:g} requests/s in total exceed {MAX_TOTAL_RPS:g} "
            "(the load generator shares the machine with the whole stack)"
        )
    errors += timing_errors(s)
    errors += [
        f"load.{i}.at: {p.at / 3600:g}h is after the end of the day ({s.clock.day / 3600:g}h)"
        for i, p in enumerate(s.load)
        if p.at > s.clock.day
    ]
    for i, event in enumerate(s.timeline):
        field = f"timeline.{i}"
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
            elif s.training.kueue and body.gpus > total_gpus - s.training.reserve_gpus:
                errors.append(
                    f"{field}.training.gpus: {body.gpus} exceed the queue's quota "
                    f"({total_gpus} GPUs - training.reserve_gpus {s.training.reserve_gpus}): "
                    "Kueue would never admit it"
                )
    return errors


def _clock(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _span(s: Scenario, event: Event) -> tuple[float, float]:
    """[start, end) of an event on the simulated clock (an instant for capacity and scale)."""
    duration = getattr(event.body, "duration", None)
    return event.at, event.at + duration if duration else s.clock.day


def timing_errors(s: Scenario) -> list[str]:
    """Events must play as written: inside the day, and no two events fighting over one subject
    (two maintenances of one node or outages of one provider overlapping, two capacity or scale
    changes of one subject at the same instant), so the run is exactly as long as ``clock.day``."""
    errors: list[str] = []
    day = s.clock.day / 3600
    taken: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for i, event in enumerate(s.timeline):
        field = f"timeline.{i}"
        if event.at > s.clock.day:
            errors.append(f"{field}.at: {event.at / 3600:g}h is after the end of the day ({day:g}h)")
            continue
        body = event.body
        duration = getattr(body, "duration", None)
        if duration and event.at + duration > s.clock.day:
            errors.append(
                f"{field}.{event.kind}.duration: {duration / 3600:g}h from {_clock(event.at)} ends at "
                f"{_clock(event.at + duration)}, after the end of the day ({day:g}h)"
            )
        if isinstance(body, Training):
            continue  # trainings may overlap: the queue (or the scheduler) sorts them out
        subject = str(getattr(body, "provider", getattr(body, "node", getattr(body, "workload", ""))))
        start, end = _span(s, event) if isinstance(body, Maintenance | Outage) else (event.at, event.at)
        for other_start, other_end, j in taken.get((event.kind, subject), []):
            instant = start == end == other_start == other_end
            if instant or (start < other_end and other_start < end):
                errors.append(
                    f"{field}.{event.kind}: overlaps timeline.{j} ({event.kind} of {subject} "
                    f"at {_clock(other_start)})"
                )
        taken.setdefault((event.kind, subject), []).append((start, end, i))
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
            if str(err["type"]).endswith("_type"):  # strict: "8" is not 8, say what was written
                message += f", got {err['input']!r}"
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
