"""fakecloud server configuration (YAML → pydantic), with errors that name the field.

One file describes one simulated provider: its catalog (GPU shapes, prices, capacity, regions),
how fast deployments move through their lifecycle, and the starting values of the chaos knobs.
Run several servers with different files to get several competing providers.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vkprovider.plugins.api import gpu_memory_gb, normalize_gpu


class FakeCloudConfigError(ValueError):
    """The config is invalid; the message names the file and each bad field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Knobs(_Strict):
    """Runtime-tunable misbehaviour. Rates are probabilities per API request (or per status read
    for ``loss_rate``), drawn from one seeded RNG so a test run is reproducible."""

    latency_seconds: float = Field(default=0.0, ge=0)
    jitter_seconds: float = Field(default=0.0, ge=0)
    error_rate: float = Field(default=0.0, ge=0, le=1)
    error_status: int = Field(default=503, ge=500, le=599)
    rate_limit_rate: float = Field(default=0.0, ge=0, le=1)
    retry_after_seconds: float = Field(default=1.0, ge=0)
    timeout_rate: float = Field(default=0.0, ge=0, le=1)
    hang_seconds: float = Field(default=30.0, ge=0)
    loss_rate: float = Field(default=0.0, ge=0, le=1)
    ambiguous_create_rate: float = Field(
        default=0.0, ge=0, le=1, description="share of creates that happen but answer with an error"
    )
    ambiguous_status: int = Field(default=500, ge=500, le=599)
    outage: bool = False
    billing_error: bool = False
    routable: bool = Field(
        default=True,
        description="endpoints answer each running deployment's address; false: no route (no addresses)",
    )
    round_trip_seconds: float = Field(
        default=0.0,
        ge=0,
        description="each request to a deployment's served ports (serve_netns) answers after this",
    )
    echo_input: bool = Field(
        default=False, description="refuse creates (422), quoting the request's env, files and credentials"
    )
    # Glitches that are not failures (see glitches.py): the workload is fine, the API misreports.
    list_omit_rate: float = Field(
        default=0.0, ge=0, le=1, description="share of live deployments a list answer leaves out"
    )
    unknown_rate: float = Field(
        default=0.0, ge=0, le=1, description="share of live deployments a list answer reports Unknown"
    )
    delete_delay_seconds: float = Field(
        default=0.0, ge=0, description="a delete is asynchronous: still listed (and found) this long"
    )
    watch_max_seconds: float = Field(
        default=0.0, ge=0, description="a watch stream ends after this; 0: never"
    )
    paths: list[str] = Field(default=[], description="path prefixes chaos applies to; empty = all API")
    methods: list[str] = Field(default=[], description="HTTP methods chaos applies to; empty = all")


class CatalogEntry(_Strict):
    id: str = Field(default="", description="offer id; derived from the shape when empty")
    gpu_type: str = Field(min_length=1)
    gpu_count: int = Field(default=1, ge=1)
    gpu_memory_gb: float = Field(default=0.0, ge=0)
    region: str = "us-east"
    price_per_hour: float = Field(ge=0)
    capacity: int = Field(default=10, ge=0)
    spot: bool = False
    cpu: float = Field(default=8.0, ge=0)
    memory_gb: float = Field(default=64.0, ge=0)

    @model_validator(mode="after")
    def _normalize(self) -> CatalogEntry:
        self.gpu_type = normalize_gpu(self.gpu_type)
        if not self.gpu_memory_gb:
            self.gpu_memory_gb = gpu_memory_gb(self.gpu_type)
        if not self.id:
            self.id = f"{self.gpu_type.lower()}-x{self.gpu_count}-{self.region}" + (
                "-spot" if self.spot else ""
            )
        return self


class Lifecycle(_Strict):
    """Seconds from create to running, then to serving (Ready); ``run_seconds`` ends the run."""

    provisioning_seconds: float = Field(default=2.0, ge=0)
    serving_after_seconds: float = Field(default=3.0, ge=0)
    run_seconds: float | None = Field(default=None, ge=0, description="None: serve until deleted")
    exit_code: int = 0
    log_interval_seconds: float = Field(default=1.0, gt=0)
    watch_poll_seconds: float = Field(default=0.1, gt=0)
    watch_heartbeat_seconds: float = Field(default=5.0, gt=0)
    log_lines: list[str] = Field(
        default=[], description="lines each container logs when it starts (after its env names)"
    )


class FakeCloudConfig(_Strict):
    provider: str = Field(default="fakecloud", min_length=1)
    seed: int | None = None
    api_key: str | None = Field(default=None, repr=False, description="require 'Authorization: Bearer'")
    ip_range: str | None = Field(
        default=None, description="IPv4 CIDR pod IPs come from; default: a /18 derived from the port"
    )
    serve_netns: str | None = Field(
        default=None,
        description=(
            "network namespace in which each running deployment's TCP container ports answer "
            "HTTP at its address (the dev cluster's backends namespace, devcluster.datapath); "
            "None: nothing listens"
        ),
    )
    catalog: list[CatalogEntry] = Field(min_length=1)
    lifecycle: Lifecycle = Lifecycle()
    knobs: Knobs = Knobs()

    @field_validator("ip_range")
    @classmethod
    def _cidr(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            network = ipaddress.IPv4Network(value)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 CIDR: {exc}") from None
        if network.num_addresses < 4:
            raise ValueError("range too small: needs at least a /30")
        return str(network)

    @model_validator(mode="after")
    def _unique_ids(self) -> FakeCloudConfig:
        ids = [entry.id for entry in self.catalog]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"catalog: duplicate offer ids {duplicates}")
        return self


def parse_config(data: Any, source: str = "config") -> FakeCloudConfig:
    try:
        return FakeCloudConfig.model_validate(data)
    except ValidationError as exc:
        lines = [f"invalid fakecloud configuration in {source}:"]
        for err in exc.errors():
            field = ".".join(str(part) for part in err["loc"]) or "(root)"
            lines.append(f"  {field}: {err['msg']}")
        raise FakeCloudConfigError("\n".join(lines)) from None


def load_config(path: str | Path) -> FakeCloudConfig:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise FakeCloudConfigError(f"fakecloud config file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise FakeCloudConfigError(f"fakecloud config {path} is not valid YAML: {exc}") from None
    return parse_config(data, str(path))
