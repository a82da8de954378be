"""Configuration of one remote-Kubernetes provider instance."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vkprovider.plugins.api import DEFAULT_LOG_STREAM_CONNECTIONS


class KubernetesSettings(BaseModel):
    """Which cluster, where pods go, how hard to hit the API, and how offers are priced."""

    model_config = ConfigDict(extra="forbid")

    kubeconfig: Path = Field(description="kubeconfig of the remote cluster")
    context: str | None = Field(default=None, description="kubeconfig context; the current one when unset")
    namespace: str = Field(default="vkprovider", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    create_namespace: bool = Field(default=False, description="create the namespace on first deploy")
    qps: float = Field(default=20.0, gt=0)
    burst: int = Field(default=40, ge=1)
    request_timeout_seconds: float = Field(default=30.0, gt=0)
    # offers
    gpu_resource: str = "nvidia.com/gpu"
    gpu_type_label: str = Field(default="nvidia.com/gpu.product", description="node label naming the GPU")
    default_gpu_type: str = Field(default="", description="GPU type of nodes without the label ('' = skip)")
    node_selector: dict[str, str] = Field(default={}, description="only these nodes count and receive pods")
    gpu_counts: list[int] = Field(default=[1, 2, 4, 8], min_length=1)
    price_per_gpu_hour: float = Field(default=0.0, ge=0)
    region: str = ""
    count_requested: bool = Field(default=True, description="subtract running pods' GPU requests")
    #: Serve logs through the remote pod-log API; turn off where the remote API server cannot
    #: reach its kubelets (some private clusters, kwok), so callers are not promised logs.
    logs: bool = True
    #: Log streams use a client and connection pool of their own (a follow holds its connection).
    log_max_connections: int = Field(default=DEFAULT_LOG_STREAM_CONNECTIONS, ge=1)
    # pods
    tolerations: list[dict[str, Any]] = []
    extra_labels: dict[str, str] = {}
    termination_grace_seconds: int | None = Field(default=None, ge=0)
    # how the local cluster reaches a remote pod (capability ``endpoints``)
    expose: Literal["none", "NodePort", "LoadBalancer"] = Field(
        default="none",
        description=(
            "create a Service of this type per pod that declares ports, and report its address as "
            "the pod's route; none: no route (the endpoints capability is off)"
        ),
    )
    node_addresses: list[str] = Field(
        default=[],
        description=(
            "NodePort: remote node addresses the local cluster reaches; empty: the pod's hostIP "
            "(its node's InternalIP)"
        ),
    )
