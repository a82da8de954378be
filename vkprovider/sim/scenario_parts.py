"""The building blocks of a scenario file: simulated durations, the fleet, providers,
workloads and the timeline's event kinds (see :mod:`vkprovider.sim.scenario`)."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)

NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: the day's load generator shares the machine with the whole stack: bounded per workload and in total
MAX_WORKLOAD_RPS = 100.0
MAX_TOTAL_RPS = 200.0
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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Clock(Strict):
    day: SimSeconds = Field(default=24 * 3600.0, gt=0, description="length of the simulated day")
    real_seconds: float = Field(default=300.0, gt=0, description="wall-clock seconds the day takes")


class Fleet(Strict):
    """The local GPU nodes (kwok): ``nodes`` x ``gpus_per_node`` of ``gpu_type``."""

    nodes: int = Field(ge=1, le=64)
    gpus_per_node: int = Field(gt=0, le=64)
    gpu_type: str = Field(default="H100-SXM-80GB", min_length=1)
    ready_after: SimSeconds = Field(default=300.0, description="a local replica's start → Ready (model load)")


class ProviderSpec(Strict):
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
    round_trip_ms: float = Field(
        default=0.0,
        ge=0,
        le=5000,
        description="extra latency of each request its replicas answer, in real milliseconds (not compressed)",
    )


class Pdb(Strict):
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


class Hpa(Strict):
    min_replicas: int = Field(ge=1)
    max_replicas: int = Field(ge=1)
    target_cpu_percent: int = Field(default=70, ge=1, le=100)

    @model_validator(mode="after")
    def _band(self) -> Hpa:
        if self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas must be >= min_replicas")
        return self


class Workload(Strict):
    """An inference Deployment that prefers local nodes and may burst to the virtual node."""

    name: str = Field(pattern=NAME, max_length=40)
    replicas: int = Field(ge=0, le=500)
    gpus: int = Field(default=1, ge=1, description="GPUs per replica")
    pdb: Pdb | None = Pdb(max_unavailable=1)
    hpa: Hpa | None = None
    requests_per_second: float = Field(
        default=5.0,
        gt=0,
        le=MAX_WORKLOAD_RPS,
        description="requests per real second the load generator sends to the workload's Service all day",
    )


class LoadPoint(Strict):
    """From ``at`` on, every external replica's container uses ``cpu_cores`` (fakecloud's load
    knob, ``PUT /admin/load``): what ``kubectl top`` shows and the HPAs scale on. Local (kwok)
    replicas report no usage."""

    at: SimSeconds
    cpu_cores: float = Field(ge=0, le=1024)


def _increasing(points: list[LoadPoint]) -> list[LoadPoint]:
    if any(b.at <= a.at for a, b in pairwise(points)):
        raise ValueError("points must be in increasing order of at")
    return points


#: The scenario's load curve: a step function over the day, in increasing ``at``.
LoadCurve = Annotated[list[LoadPoint], AfterValidator(_increasing)]


class Training(Strict):
    """A training Job: ``gpus`` in pods of ``gpus_per_pod``, for ``duration``, at ``priority``."""

    name: str = Field(pattern=NAME, max_length=40)
    gpus: int = Field(gt=0)
    gpus_per_pod: int | None = Field(default=None, gt=0, description="default: one node's GPUs")
    duration: SimSeconds = Field(gt=0)
    priority: int = Field(default=1000, ge=1, le=1_000_000_000, description="above inference (0)")


class TrainingSubmission(Strict):
    """How the timeline's training Jobs are submitted (the scenario's ``training:`` section)."""

    via: Literal["job", "kueue"] = Field(
        default="job",
        description="job: plain batch/v1 Jobs, started on arrival and ended on schedule; kueue: through "
        "deploy/kueue's LocalQueue (namespace research), admitted whole by real Kueue, running for "
        "their duration from admission",
    )
    quota_sync_seconds: float = Field(
        default=2.0, gt=0, le=60, description="kueue: the quota sync's interval inside vkprovider serve"
    )
    reserve_gpus: int = Field(
        default=0, ge=0, description="kueue: local GPUs the quota sync keeps out of the queue's quota"
    )

    @property
    def kueue(self) -> bool:
        return self.via == "kueue"


class CapacityChange(Strict):
    """From now on the provider runs at most ``capacity`` instances (running ones keep running)."""

    provider: str
    capacity: int = Field(ge=0)


class Outage(Strict):
    """The provider's API fails every call (503) for ``duration`` (default: the rest of the day)."""

    provider: str
    duration: SimSeconds | None = Field(default=None, gt=0)


class Maintenance(Strict):
    """Local node ``node`` (index into the fleet) is cordoned for ``duration`` (default: the rest)."""

    node: int = Field(ge=0)
    duration: SimSeconds | None = Field(default=None, gt=0)


class Scale(Strict):
    workload: str
    replicas: int = Field(ge=0, le=500)


KINDS = ("training", "capacity", "outage", "maintenance", "scale")


class Event(Strict):
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
