"""Service configuration: a YAML file plus ``VKPROVIDER_*`` environment variables.

Environment variables override the file (``VKPROVIDER_NODE__NAME=vk-2``). Every validation
error is re-raised as :class:`ConfigError` naming the dotted field path (or the variable, for a
value from the environment), all of them in one message, so an operator sees
``providers.1.settings.url: 'x' is not a URL`` rather than a traceback. ``serve`` adds the
start-up checks of :mod:`vkprovider.preflight` (ports, kubeconfig, provider settings) to the same
pass, before anything is connected to.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import EnvSettingsSource, SettingsError

from vkprovider import config_source
from vkprovider.errors import ConfigError
from vkprovider.eventloop import EventLoopChoice
from vkprovider.gate.config import GateConfig
from vkprovider.http.limits import AdminServerLimits, ServerLimits
from vkprovider.placement.config import PlacementConfig
from vkprovider.preflight import (
    FieldProblem,
    StartupChecks,
    checks_from,
    host_problem,
    kubeconfig_problem,
    no_cluster_message,
    port_problem,
    url_fields,
)
from vkprovider.quota.config import QuotaConfig
from vkprovider.taint_config import NodeTaint, duplicate_taints
from vkprovider.traffic.config import ZONE_LABEL, TrafficConfig

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


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
    zone: str = Field(
        default="vkprovider-external",
        pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$",
        description=(
            "the node's topology.kubernetes.io/zone label (a zone of its own, so Services with "
            "trafficDistribution: PreferSameZone keep traffic on local replicas while one is "
            "ready; docs/virtual-node.md), also written on the endpoints vkprovider publishes; "
            "a zone in node.labels wins; empty: no zone label"
        ),
    )
    max_gpus: int | None = Field(default=None, ge=0, description="cap on advertised nvidia.com/gpu")
    providers: list[str] = Field(
        default=[],
        description=(
            "the providers this node places pods on (names from providers:); its placement, "
            "capacity and outage taint see only these; empty: every configured provider"
        ),
    )

    taints: list[NodeTaint] = Field(
        default=[],
        description=(
            "this node's own taints ({key, value, effect}), e.g. to keep a pool for the pods that "
            "tolerate it; removed from the Node when removed here (docs/virtual-node.md)"
        ),
    )

    def topology_zone(self) -> str | None:
        """The zone the node is labelled with (``labels`` first, then ``zone``), or None."""
        return self.labels.get(ZONE_LABEL) or self.zone or None

    @model_validator(mode="after")
    def _unique_taints(self) -> NodeConfig:
        found = duplicate_taints(self.taints)
        if found:
            raise FieldProblem(found)
        return self

    @model_validator(mode="after")
    def _renew_within_duration(self) -> NodeConfig:
        if self.lease_renew_seconds >= self.lease_duration_seconds:
            raise FieldProblem.one(
                "lease_renew_seconds",
                f"{self.lease_renew_seconds:g} must be less than node.lease_duration_seconds "
                f"({self.lease_duration_seconds}), or the Lease expires between renewals",
            )
        return self


class KubeConfig(_Section):
    kubeconfig: str | None = Field(
        default=None, validate_default=True, description="path; in-cluster config when unset"
    )
    qps: float = Field(default=50.0, gt=0)
    burst: int = Field(default=100, ge=1)

    @field_validator("kubeconfig")
    @classmethod
    def _usable(cls, value: str | None, info: ValidationInfo) -> str | None:
        checks = checks_from(info.context)
        if checks is None or not checks.kube:
            return value
        if value:
            problem = kubeconfig_problem(value)
            if problem is not None:
                raise ValueError(problem)
        elif not checks.in_cluster():
            raise ValueError(no_cluster_message())
        return value


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
    status_before_delete: bool = Field(
        default=False,
        description=(
            "graceful deletion writes the terminated container states before deleting the pod "
            "object even when nothing keeps it (the kubelet's way, one request more per pod); "
            "default: only when finalizers keep the object after the delete"
        ),
    )


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
    lease_name: str = Field(
        default="", description="default: vkprovider-<node name> (one node only: with nodes:, each node's)"
    )
    replicas: int = Field(
        default=1,
        ge=1,
        description=(
            "how many replicas share the nodes: a replica leading its share (nodes / replicas, "
            "rounded up) waits one lease duration before taking another free node Lease, so the "
            "others take it first (docs/virtual-node.md); 1: take every free Lease at once"
        ),
    )
    identity: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")


class HttpConfig(_Section):
    """The admin API. Off loopback it serves TLS when ``tls_cert_file``/``tls_key_file`` are set;
    without them it refuses bearer tokens from peers other than this host (plain HTTP would
    carry them, full apiserver credentials, in clear text)."""

    admin_host: str = "127.0.0.1"
    admin_port: int = Field(default=10255, ge=0, le=65535)
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    limits: AdminServerLimits = AdminServerLimits()

    @model_validator(mode="after")
    def _tls_pair(self) -> HttpConfig:
        return _check_pair(self)

    @model_validator(mode="after")
    def _free(self, info: ValidationInfo) -> HttpConfig:
        checks = checks_from(info.context)
        if checks is not None and checks.ports:
            bad_host = host_problem(self.admin_host)
            if bad_host is not None:
                raise FieldProblem.one("admin_host", bad_host)
            problem = port_problem(self.admin_host, self.admin_port)
            if problem is not None:
                raise FieldProblem.one("admin_port", problem)
        return self


_Paired = TypeVar("_Paired", "HttpConfig", "KubeletConfig")


def _check_pair(section: _Paired, *files: str) -> _Paired:
    """A serving certificate and its key come together, and every file named exists."""
    if bool(section.tls_cert_file) != bool(section.tls_key_file):
        missing = "tls_key_file" if section.tls_cert_file else "tls_cert_file"
        raise FieldProblem.one(missing, "tls_cert_file and tls_key_file are set together")
    for name in ("tls_cert_file", "tls_key_file", *files):
        path = getattr(section, name)
        if path and not os.path.isfile(path):
            raise FieldProblem.one(name, f"{path}: no such file")
    return section


class KubeletLogsConfig(_Section):
    """Bounds on ``kubectl logs`` streams (``kubelet.logs``): anyone with ``pods/log`` can open
    follow streams, each holding a connection to the pod's provider (docs/kubelet-api.md)."""

    max_follow_per_pod: int = Field(default=10, ge=1, description="concurrent follow streams per pod")
    max_follow_per_provider: int = Field(
        default=50, ge=1, description="concurrent follow streams per provider (429 beyond)"
    )
    max_stream_seconds: float = Field(default=3600.0, gt=0, description="any log stream ends after this")
    idle_timeout_seconds: float = Field(
        default=900.0, gt=0, description="a stream without a byte from the provider this long ends"
    )
    retry_after_seconds: int = Field(default=10, ge=1, description="Retry-After of the 429")


class KubeletConfig(_Section):
    """The kubelet API: TLS on ``node.kubelet_port`` (logs, pods, stats, metrics for the apiserver
    and metrics-server). Served when ``tls_cert_file`` and ``tls_key_file`` are set, or ``csr``."""

    bind_host: str = Field(default="", description="default: node.internal_ip (what the Node advertises)")
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    client_ca_file: str | None = Field(
        default=None, description="CA that signs client certificates (the apiserver's kubelet client)"
    )
    anonymous: bool = Field(
        default=False, description="let requests without credentials in, as system:anonymous"
    )
    token_cache_seconds: float = Field(default=120.0, ge=0)
    authorized_cache_seconds: float = Field(default=300.0, ge=0)
    unauthorized_cache_seconds: float = Field(default=30.0, ge=0)
    review_qps: float = Field(
        default=20.0, gt=0, description="TokenReviews/SubjectAccessReviews a second (their own limiter)"
    )
    review_burst: int = Field(default=40, ge=1)
    reviews_in_flight: int = Field(
        default=64, ge=1, description="reviews waiting or running at once; beyond: 429 with Retry-After"
    )
    csr: bool = Field(
        default=False,
        description="obtain (and renew) the serving cert with a kubernetes.io/kubelet-serving CSR",
    )
    cert_dir: str = Field(default="", description="where a CSR-issued key and cert are written")
    limits: ServerLimits = ServerLimits()

    logs: KubeletLogsConfig = KubeletLogsConfig()

    @model_validator(mode="after")
    def _pair(self) -> KubeletConfig:
        if self.csr and self.tls_cert_file:
            raise FieldProblem.one("csr", "set either tls_cert_file/tls_key_file or csr, not both")
        return _check_pair(self, "client_ca_file")

    @property
    def enabled(self) -> bool:
        return bool(self.tls_cert_file and self.tls_key_file) or self.csr


class Settings(BaseModel):
    """The whole config. A plain model (not ``BaseSettings``) so that validation can carry the
    start-up checks as context; :func:`load_settings` merges the environment in itself."""

    model_config = ConfigDict(extra="forbid")

    node: NodeConfig = NodeConfig()
    nodes: list[NodeConfig] = Field(
        default=[],
        description=(
            "several virtual nodes, each with its own Lease and leader (instead of node:, which "
            "is the one-node form; docs/virtual-node.md)"
        ),
    )
    kube: KubeConfig = Field(default={}, validate_default=True)  # a dict, so checks run on it
    pods: PodsConfig = PodsConfig()
    http: HttpConfig = Field(default={}, validate_default=True)
    kubelet: KubeletConfig = KubeletConfig()
    providers: list[ProviderConfig] = Field(default=[], validate_default=True)
    placement: PlacementConfig = PlacementConfig()
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    gate: GateConfig | None = None
    quota: QuotaConfig | None = None
    traffic: TrafficConfig = TrafficConfig()
    log_json: bool = False
    log_level: str = "INFO"
    event_loop: EventLoopChoice = "auto"

    @field_validator("providers")
    @classmethod
    def _check_providers(cls, value: list[ProviderConfig], info: ValidationInfo) -> list[ProviderConfig]:
        checks = checks_from(info.context)
        found: list[tuple[str, str]] = []
        if not value and checks is not None and checks.require_providers:
            found.append(("", "no providers configured: a node with no backend can never run a pod"))
        seen: set[str] = set()
        for i, provider in enumerate(value):
            if provider.name in seen:
                found.append((f"{i}.name", f"duplicate provider name {provider.name!r}"))
            seen.add(provider.name)
            if provider.grpc is not None:
                continue  # an out-of-process plugin reads its own settings
            problems = url_fields(provider.settings)
            if checks is not None and checks.provider_settings is not None:
                problems += checks.provider_settings(i, provider.name, provider.adapter, provider.settings)
            seen_paths: set[str] = set()
            for path, message in problems:
                full = f"{i}.{path}" if path.startswith(("settings", "adapter")) else f"{i}.settings.{path}"
                if full not in seen_paths:  # the generic URL check and the adapter's may agree
                    seen_paths.add(full)
                    found.append((full, f"provider {provider.name!r}: {message}"))
        if found:
            raise FieldProblem(found)
        return value

    @field_validator("placement")
    @classmethod
    def _known_providers(cls, value: PlacementConfig, info: ValidationInfo) -> PlacementConfig:
        configured = info.data.get("providers")
        if configured is None:  # providers are invalid: load_settings checks the raw names
            return value
        found = unknown_provider_names(value.model_dump(), {p.name for p in configured})
        if found:
            raise FieldProblem(found)
        return value

    @field_validator("traffic")
    @classmethod
    def _known_routable(cls, value: TrafficConfig, info: ValidationInfo) -> TrafficConfig:
        """A typo in ``routable_pod_ip_providers`` would silently leave a provider unpublished."""
        configured = info.data.get("providers")
        if configured is None:
            return value
        names = {p.name for p in configured}
        known = ", ".join(sorted(names)) or "none"
        found = [
            (
                f"routable_pod_ip_providers.{i}",
                f"no configured provider is named {name!r} (configured: {known})",
            )
            for i, name in enumerate(value.routable_pod_ip_providers)
            if name not in names
        ]
        if found:
            raise FieldProblem(found)
        return value

    def node_list(self) -> list[NodeConfig]:
        """The configured nodes: ``nodes``, or the one ``node`` section (the upgrade path)."""
        return self.nodes or [self.node]

    def _gate_taint_key(self) -> str:
        """The capacity gate's taint key, which the node agent also removes when no gate keeps
        it (the default key when there is no ``gate:`` here: a standalone gate's)."""
        return (self.gate or GateConfig()).taint.key

    @model_validator(mode="after")
    def _several_nodes(self) -> Settings:
        """``nodes:`` is checked whole: names unique, provider subsets known, and what serves
        one node only (a fixed Lease name) refused; the gate and the kubelet API run once per node
        (each its own ``kubelet_port``), the quota sync once (the first node's leader)."""
        names = {p.name for p in self.providers}
        if not self.nodes:
            found = [
                (f"node.{path}", msg)
                for path, msg in _node_problems([self.node], names, "", self._gate_taint_key())
            ]
            if found:
                raise FieldProblem(found)
            return self
        # (a dump of validated settings repeats nodes[0] as node: that is no second node)
        if "node" in self.model_fields_set and self.node != self.nodes[0]:
            if self.node.model_fields_set - {"internal_ip"}:
                raise FieldProblem.one(
                    "nodes",
                    "give either node: (one node) or nodes: (several nodes), not both: move node: into "
                    "nodes: (with nodes:, node: may give only internal_ip, every node's address)",
                )
            # node.internal_ip alone (the shipped Deployment sets VKPROVIDER_NODE__INTERNAL_IP to
            # the pod IP): the address of every node that gives none of its own
            for node in self.nodes:
                if "internal_ip" not in node.model_fields_set:
                    node.internal_ip = self.node.internal_ip
        found = _node_problems(self.nodes, names, "nodes.", self._gate_taint_key())
        if len(self.nodes) > 1:
            refused = {
                "leader_election.lease_name": bool(self.leader_election.lease_name),
            }
            message = (
                f"serves one node only, not supported with {len(self.nodes)} nodes (docs/virtual-node.md)"
            )
            found += [(path, message) for path, bad in refused.items() if bad]
        if found:
            raise FieldProblem(found)
        self.node = self.nodes[0]  # what one-node callers (status, explain, uninstall-check) read
        self.__pydantic_fields_set__.discard("node")  # derived, not given
        return self

    @model_validator(mode="after")
    def _kubelet_port_free(self, info: ValidationInfo) -> Settings:
        """The kubelet API listens on each node's ``kubelet_port``: one already taken (a real
        kubelet on the host, another replica) or two nodes on one address is a start-up error
        naming the field, not a later crash."""
        if not self.kubelet.enabled:
            return self
        checks = checks_from(info.context)
        where = "kubelet.bind_host" if self.kubelet.bind_host else "node.internal_ip"
        found: list[tuple[str, str]] = []
        taken: dict[tuple[str, int], str] = {}
        for i, node in enumerate(self.node_list()):
            path = f"nodes.{i}.kubelet_port" if self.nodes else "node.kubelet_port"
            address = (self.kubelet.bind_host or node.internal_ip, node.kubelet_port)
            if address in taken:
                found.append(
                    (
                        path,
                        f"{address[0]}:{address[1]} is also {taken[address]} (each node's kubelet API needs its own)",
                    )
                )
                continue
            taken[address] = path
            problem = port_problem(*address) if checks is not None and checks.ports else None
            if problem is not None:
                found.append((path, f"{problem} (the kubelet API; host from {where})"))
        if found:
            raise FieldProblem(found)
        return self

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r} (one of: {', '.join(LOG_LEVELS)})")
        return level


def _node_problems(
    nodes: list[NodeConfig], providers: set[str], prefix: str, gate_taint_key: str
) -> list[tuple[str, str]]:
    """Duplicate node names, provider subsets naming no configured provider, and a node taint
    with the capacity gate's key (paths after ``prefix``, then the node's index in a list)."""
    known = ", ".join(sorted(providers)) or "none"
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        at = f"{prefix}{i}." if prefix else ""
        if node.name in seen:
            found.append((f"{at}name", f"duplicate node name {node.name!r}"))
        seen.add(node.name)
        found += [
            (f"{at}providers.{j}", f"no configured provider is named {name!r} (configured: {known})")
            for j, name in enumerate(node.providers)
            if name not in providers
        ]
        found += [
            (
                f"{at}taints.{j}.key",
                f"{taint.key!r} is the capacity gate's taint (gate.taint.key): the gate and the "
                "node agent set and remove it, so a configured one would be undone",
            )
            for j, taint in enumerate(node.taints)
            if taint.key == gate_taint_key
        ]
    return found


def unknown_provider_names(placement: Mapping[str, Any], names: set[str]) -> list[tuple[str, str]]:
    """Names under ``placement`` (terms, allow/deny lists) that match no configured provider:
    a typo there would silently drop a discount or a restriction."""
    known = ", ".join(sorted(names)) or "none"
    found: list[tuple[str, str]] = []

    def check(path: str, name: object) -> None:
        if name not in names:
            found.append((path, f"no configured provider is named {name!r} (configured: {known})"))

    terms = placement.get("providers")
    for name in sorted(terms, key=str) if isinstance(terms, Mapping) else ():
        check(f"providers.{name}", name)
    for field in ("providers_allow", "providers_deny"):
        listed = placement.get(field)
        for i, name in enumerate(listed if isinstance(listed, list) else ()):
            check(f"{field}.{i}", name)
    return found


def _raw_unknown_names(data: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """The same check on unvalidated data, for when ``providers`` itself failed validation."""
    providers, placement = data.get("providers"), data.get("placement")
    if not isinstance(providers, list) or not isinstance(placement, Mapping):
        return []
    names = {p["name"] for p in providers if isinstance(p, Mapping) and isinstance(p.get("name"), str)}
    return [(("placement", *path.split(".")), msg) for path, msg in unknown_provider_names(placement, names)]


def format_validation_error(exc: ValidationError, source: str) -> str:
    """Every error of ``exc`` on its own line, by dotted field path."""
    lines = [f"invalid configuration in {source}:"]
    lines += [f"  {line}" for line in config_source.report(config_source.problems(exc), {})]
    return "\n".join(lines)


def _read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: top level must be a mapping, got {type(loaded).__name__}")
    return loaded or {}


def _read_env() -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """The environment's values (pydantic-settings parsing) and which variable gave which field."""
    prefix, delimiter = "VKPROVIDER_", "__"
    try:
        source = EnvSettingsSource(
            Settings,  # type: ignore[arg-type]  # reads only model_config and the fields
            case_sensitive=False,
            env_prefix=prefix,
            env_nested_delimiter=delimiter,
        )
        values = source()
    except SettingsError as exc:  # a JSON-valued variable (lists, mappings) that is not JSON
        field = str(exc).split('"')[1] if '"' in str(exc) else ""
        variable = prefix + field.upper()
        raise ConfigError(
            f"invalid configuration (environment):\n  {variable} ({field}): not valid JSON"
        ) from None
    return values, config_source.env_paths(values, prefix, delimiter)


def load_settings(
    path: str | os.PathLike[str] | None = None, *, checks: StartupChecks | None = None
) -> Settings:
    """Load and validate; raise ``ConfigError`` naming every bad field (or variable).

    ``checks`` adds the start-up checks (``serve``): they run in the same validation pass."""
    data = _read_file(path) if path is not None else {}
    env_values, env = _read_env()
    merged = config_source.deep_merge(data, env_values)
    try:
        return Settings.model_validate(merged, context=checks)
    except ValidationError as exc:
        found = config_source.problems(exc)
        if any(loc[:1] == ("providers",) for loc, _ in found):
            found += _raw_unknown_names(merged)
        lines = [config_source.header(str(path) if path is not None else None, env)]
        lines += [f"  {line}" for line in config_source.report(found, env)]
        raise ConfigError("\n".join(lines)) from None
