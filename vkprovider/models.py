"""Provider-neutral data: what the service asks of a provider and what a provider reports.

These pydantic models are the edge between the service and every adapter, in-process or over
gRPC. They are deliberately flat and small so that any cloud's deployment format can be built
from a ``DeploymentRequest`` and any cloud's status can be read into a ``DeploymentStatus``.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: Every external deployment carries these labels/tags so ``list(node)`` can be scoped to one
#: virtual node and orphans can be found after a crash.
LABEL_POD_UID = "vkprovider.io/pod-uid"
LABEL_NODE_NAME = "vkprovider.io/node-name"
LABEL_POD_NAMESPACE = "vkprovider.io/pod-namespace"
LABEL_POD_NAME = "vkprovider.io/pod-name"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Phase(enum.StrEnum):
    """Deployment phase; maps one-to-one onto a pod phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class RateLimit(_Model):
    """A provider API's request limit as its adapter declares it; ``per_second=None``: no limit."""

    per_second: float | None = Field(default=None, gt=0)
    burst: int = Field(default=1, ge=1)


class Capabilities(_Model):
    """Optional features an adapter has (like CSI's plugin capabilities)."""

    logs: bool = False
    metrics: bool = False
    update_in_place: bool = False
    watch: bool = False
    #: The adapter says how a running deployment is reached (``endpoints(uid)``): the address a
    #: client in the cluster uses and the port each container port is published on.
    endpoints: bool = False
    #: The API's own limit, the default for placement's client-side limit when config sets none;
    #: ``None``: the adapter declares nothing (the built-in default applies).
    rate_limit: RateLimit | None = None


class ProviderInfo(_Model):
    """Identity of an adapter instance."""

    name: str
    adapter: str
    version: str
    capabilities: Capabilities = Capabilities()


class Offer(_Model):
    """One purchasable GPU shape at one price, as the provider's catalog advertises it."""

    provider: str
    offer_id: str
    gpu_type: str = Field(description="normalized GPU type, e.g. H100-SXM-80GB")
    gpu_count: int = Field(ge=0, description="GPUs per deployment of this offer")
    gpu_memory_gb: float = Field(ge=0, default=0.0, description="memory per GPU")
    region: str = ""
    price_per_hour: float = Field(ge=0, description="price of the whole offer (all its GPUs), per hour")
    capacity: int = Field(ge=0, description="how many more deployments of this offer fit now")
    spot: bool = False
    cpu: float = 0.0
    memory_gb: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return (self.provider, self.offer_id)


class EnvVar(_Model):
    """A resolved environment variable. ``value`` never appears in reprs, logs or events."""

    name: str
    value: str = Field(repr=False)
    secret: bool = False


class Port(_Model):
    container_port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    name: str = ""


class FileMount(_Model):
    """A file to materialise in the container (from a ConfigMap, Secret or an emptyDir marker)."""

    path: str
    content: bytes = Field(repr=False, default=b"")
    mode: int = 0o644
    secret: bool = False


class Container(_Model):
    name: str
    image: str
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []
    ports: list[Port] = []
    working_dir: str = ""
    cpu: float = 0.0
    memory_bytes: int = 0
    files: list[FileMount] = []


class RegistryCredential(_Model):
    server: str
    username: str
    password: str = Field(repr=False)


class DeploymentRequest(_Model):
    """A pod translated into provider-neutral form; deploy is idempotent on ``uid``."""

    uid: str
    namespace: str
    name: str
    node_name: str
    containers: list[Container]
    init_containers: list[Container] = []
    gpu_type: str | None = None
    gpu_count: int = Field(ge=0, default=0)
    gpu_memory_gb: float = 0.0
    offer_id: str | None = Field(default=None, description="the offer placement chose, if any")
    region: str | None = None
    spot: bool = False
    restart_policy: Literal["Always", "OnFailure", "Never"] = "Always"
    registry_credentials: list[RegistryCredential] = []
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}

    def tags(self) -> dict[str, str]:
        """Labels every external deployment must carry (pod UID, node, namespace, name)."""
        return {
            LABEL_POD_UID: self.uid,
            LABEL_NODE_NAME: self.node_name,
            LABEL_POD_NAMESPACE: self.namespace,
            LABEL_POD_NAME: self.name,
        }


class ContainerState(enum.StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"


class ContainerStatus(_Model):
    name: str
    state: ContainerState = ContainerState.WAITING
    ready: bool = False
    restart_count: int = 0
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    image: str = ""


class PortMapping(_Model):
    """One container port as a client reaches it: ``address:port`` serves ``container_port``."""

    container_port: int = Field(ge=1, le=65535, description="the port the container listens on")
    protocol: Literal["TCP", "UDP", "SCTP"] = Field(default="TCP", description="TCP, UDP or SCTP")
    port: int = Field(ge=1, le=65535, description="the port a client must connect to")


class DeploymentEndpoints(_Model):
    """How one running deployment is reached from the cluster (``endpoints`` capability).

    ``addresses`` empty means "no route (yet)": the replica is not published. A container port
    absent from ``ports`` is not reachable, even if the addresses are.
    """

    uid: str = Field(description="the pod UID the deployment runs")
    addresses: list[str] = Field(
        default=[], description="IP addresses (or DNS names) a client in the cluster connects to"
    )
    ports: list[PortMapping] = Field(default=[], description="one entry per reachable container port")

    def port_for(self, container_port: int, protocol: str = "TCP") -> int | None:
        """The port a client uses for ``container_port``/``protocol``; None: not reachable."""
        return next(
            (m.port for m in self.ports if m.container_port == container_port and m.protocol == protocol),
            None,
        )


class DeploymentStatus(_Model):
    """What a provider reports about one deployment; the only source of pod status."""

    uid: str
    phase: Phase
    ready: bool = False
    node_name: str = ""
    provider_id: str = Field(default="", description="the provider's own id for the deployment")
    offer_id: str = ""
    ip: str | None = None
    endpoint: str | None = None
    reason: str = ""
    message: str = ""
    started_at: datetime | None = None
    containers: list[ContainerStatus] = []
    price_per_hour: float | None = None
    endpoints: DeploymentEndpoints | None = Field(
        default=None,
        description=(
            "how the deployment is reached, when the provider knows it with the status (what "
            "`endpoints` would answer, same rules): the host then asks no `endpoints`; "
            "unset: not given here, the host asks `endpoints` once the deployment runs"
        ),
    )


class LogOptions(_Model):
    container: str = ""
    follow: bool = False
    tail_lines: int | None = Field(default=None, ge=0)
    since_seconds: int | None = Field(default=None, ge=0)
    limit_bytes: int | None = Field(default=None, ge=1)
    timestamps: bool = False


class ContainerUsage(_Model):
    """One container's resource use at a moment (what the kubelet's cAdvisor figures say)."""

    name: str = Field(description="the container's name in the pod spec")
    cpu_seconds_total: float = Field(ge=0, description="cumulative CPU time in core-seconds")
    cpu_cores: float | None = Field(default=None, ge=0, description="current CPU rate, if known")
    memory_working_set_bytes: int = Field(
        ge=0, description="working-set memory in bytes (what `kubectl top` and HPAs read)"
    )


class DeploymentUsage(_Model):
    """Resource use of one deployment's containers, sampled at ``timestamp``."""

    uid: str = Field(description="the pod UID the deployment runs")
    timestamp: datetime = Field(description="when the figures were sampled (the metrics' timestamps)")
    containers: list[ContainerUsage] = Field(default=[], description="one entry per running container")
