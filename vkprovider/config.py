"""Service configuration: a YAML file plus ``VKPROVIDER_*`` environment variables.

Environment variables override the file (``VKPROVIDER_NODE__NAME=vk-2``). Every validation
error is re-raised as :class:`ConfigError` naming the dotted field path, so an operator sees
``providers.1.adapter: unknown adapter 'fakeclod'`` rather than a traceback.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from vkprovider.errors import ConfigError
from vkprovider.placement.config import PlacementConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeConfig(_Section):
    name: str = Field(default="vk-external", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    internal_ip: str = "127.0.0.1"
    kubelet_port: int = Field(default=10250, ge=1, le=65535)
    lease_duration_seconds: int = Field(default=40, ge=1)
    lease_renew_seconds: float = Field(default=10.0, gt=0)
    status_update_seconds: float = Field(default=60.0, gt=0)
    probe_seconds: float = Field(default=10.0, gt=0)
    max_pods: int = Field(default=10000, ge=1)
    cpu: str = "10000"
    memory: str = "100Ti"
    labels: dict[str, str] = {}


class KubeConfig(_Section):
    kubeconfig: str | None = Field(default=None, description="path; in-cluster config when unset")
    qps: float = Field(default=50.0, gt=0)
    burst: int = Field(default=100, ge=1)


class PodsConfig(_Section):
    workers: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="pods reconciled at once; also bounds concurrent provider calls",
    )
    status_poll_seconds: float = Field(default=2.0, gt=0)
    orphan_gc_seconds: float = Field(default=60.0, gt=0)
    lost_grace_seconds: float = Field(default=60.0, ge=0)
    backoff_base_seconds: float = Field(default=0.5, gt=0)
    backoff_max_seconds: float = Field(default=60.0, gt=0)
    drain_timeout_seconds: float = Field(default=20.0, ge=0)


class GrpcPluginConfig(_Section):
    """An out-of-process plugin: either a command to launch or an address to dial."""

    command: list[str] | None = None
    address: str | None = None
    call_timeout_seconds: float = Field(default=10.0, gt=0)
    shutdown_grace_seconds: float = Field(default=5.0, ge=0)
    pass_env: list[str] = Field(
        default=[], description="host environment variables the plugin process may see (e.g. its API key)"
    )

    @model_validator(mode="after")
    def _one_of(self) -> GrpcPluginConfig:
        if bool(self.command) == bool(self.address):
            raise ValueError("set exactly one of 'command' or 'address'")
        return self


class ProviderConfig(_Section):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    adapter: str = Field(default="", description="entry point in the vkprovider.providers group")
    settings: dict[str, Any] = {}
    grpc: GrpcPluginConfig | None = None

    @model_validator(mode="after")
    def _adapter_or_grpc(self) -> ProviderConfig:
        if not self.adapter and self.grpc is None:
            raise ValueError("set 'adapter' (in-process) or 'grpc' (out-of-process)")
        return self


class LeaderElectionConfig(_Section):
    """Lease-based leader election, so two replicas never act at once."""

    enabled: bool = False
    namespace: str = "kube-system"
    lease_name: str = Field(default="", description="default: vkprovider-<node name>")
    identity: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")


class HttpConfig(_Section):
    admin_host: str = "127.0.0.1"
    admin_port: int = Field(default=10255, ge=0, le=65535)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VKPROVIDER_", env_nested_delimiter="__", extra="forbid")

    node: NodeConfig = NodeConfig()
    kube: KubeConfig = KubeConfig()
    pods: PodsConfig = PodsConfig()
    http: HttpConfig = HttpConfig()
    providers: list[ProviderConfig] = []
    placement: PlacementConfig = PlacementConfig()
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    log_json: bool = False
    log_level: str = "INFO"

    @model_validator(mode="after")
    def _unique_provider_names(self) -> Settings:
        seen: set[str] = set()
        for i, provider in enumerate(self.providers):
            if provider.name in seen:
                raise ValueError(f"providers.{i}.name: duplicate provider name {provider.name!r}")
            seen.add(provider.name)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment first so it overrides the file's values passed as init kwargs.
        return (env_settings, init_settings)


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "(root)"
        lines.append(f"  {field}: {err['msg']}")
    return "\n".join(lines)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load and validate; raise ``ConfigError`` naming the file and every bad field."""
    data: dict[str, Any] = {}
    source = "environment"
    if path is not None:
        source = str(path)
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping, got {type(loaded).__name__}")
        data = loaded or {}
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None
