"""Pure translation between vkprovider models and RunPod REST v2 shapes.

Identity: RunPod pods carry no labels or tags, so each pod is named ``vk-<pod uid>`` (the
``name`` field) and carries the pod UID, node name, namespace, pod name and container name as
``VKPROVIDER_*`` environment variables (the ``env`` map is echoed back on every Pod object). A
pod is "ours" only if both agree; ``list(node)`` keeps pods whose ``VKPROVIDER_NODE_NAME``
matches. The variables are also visible to the workload, which is harmless and handy.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from vkprovider.plugins.api import (
    Container,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    Offer,
    Phase,
    PortMapping,
    normalize_catalog_gpu,
    one_container_status,
    parse_model,
)

from .settings import RunPodSettings

log = logging.getLogger(__name__)

ENV_UID = "VKPROVIDER_POD_UID"
ENV_NODE = "VKPROVIDER_NODE_NAME"
ENV_NAMESPACE = "VKPROVIDER_POD_NAMESPACE"
ENV_POD_NAME = "VKPROVIDER_POD_NAME"
ENV_CONTAINER = "VKPROVIDER_CONTAINER_NAME"
NAME_PREFIX = "vk-"


def pod_name(uid: str) -> str:
    return f"{NAME_PREFIX}{uid}"


@dataclass(frozen=True)
class Target:
    """Where to place one pod: cloud tier, optional data center, RunPod GPU id and count."""

    cloud: str
    data_center: str
    gpu_id: str
    gpu_count: int

    @property
    def offer_id(self) -> str:
        return f"{self.cloud}/{self.data_center}/{self.gpu_id}/{self.gpu_count}"

    @classmethod
    def parse(cls, offer_id: str) -> Target:
        parts = offer_id.split("/")
        if (
            len(parts) != 4
            or parts[0] not in ("SECURE", "COMMUNITY")
            or not parts[2]
            or not parts[3].isdigit()
        ):
            raise InvalidRequest(f"offer_id {offer_id!r} is not a RunPod offer id (cloud/dc/gpu/count)")
        return cls(parts[0], parts[1], parts[2], int(parts[3]))


# --- catalog → offers -------------------------------------------------------------------------


def offers_from_catalog(provider: str, cloud: str, gpus: list[Any], settings: RunPodSettings) -> list[Offer]:
    """One offer per (GPU type, data center, GPU count) with stock; malformed entries are skipped."""
    offers: list[Offer] = []
    wanted = {g.upper() for g in settings.gpu_types}
    field = cloud.lower()
    for gpu in gpus:
        try:
            gpu_id = str(gpu["id"])
            memory = float(gpu.get("memory") or 0)
            available_here = bool(gpu[field])
            price = float(gpu["price"][field])
            max_count = int(gpu["maxCount"][field])
        except (KeyError, TypeError, ValueError):
            log.warning("provider %s: skipping malformed catalog entry %r", provider, _short(gpu))
            continue
        gpu_type = normalize_catalog_gpu(gpu_id, memory)
        if wanted and gpu_id.upper() not in wanted and gpu_type.upper() not in wanted:
            continue
        if not available_here or price <= 0 or max_count < 1:
            continue
        for dc in gpu.get("dataCenters") or []:
            dc_id = str(dc.get("id", "")) if isinstance(dc, dict) else ""
            if not dc_id or (settings.data_centers and dc_id not in settings.data_centers):
                continue
            capacity = settings.capacity_by_availability.get(dc.get("availability", "NONE"), 0)
            if capacity <= 0:
                continue
            for count in sorted(set(settings.gpu_counts)):
                if count > max_count:
                    continue
                offers.append(
                    Offer(
                        provider=provider,
                        offer_id=Target(cloud, dc_id, gpu_id, count).offer_id,
                        gpu_type=gpu_type,
                        gpu_count=count,
                        gpu_memory_gb=memory,
                        region=dc_id,
                        price_per_hour=round(price * count, 6),
                        capacity=capacity,
                        spot=False,
                    )
                )
    return offers


# --- request → create body --------------------------------------------------------------------


def check_supported(request: DeploymentRequest) -> Container:
    """The single container to run, or ``InvalidRequest`` naming the first unsupported field.

    Called before any API call: a half-deployed pod is worse than a clear failure.
    """
    if len(request.containers) != 1:
        raise InvalidRequest(
            f"spec.containers: RunPod runs exactly one container per pod, got {len(request.containers)}"
        )
    if request.init_containers:
        raise InvalidRequest("spec.initContainers: RunPod pods have no init containers")
    if request.registry_credentials:
        raise InvalidRequest("spec.imagePullSecrets: private registries are not supported by this adapter")
    container = request.containers[0]
    if container.files:
        raise InvalidRequest(
            f"spec.containers[{container.name}].volumeMounts: RunPod cannot deliver ConfigMap/Secret files"
        )
    if container.working_dir:
        raise InvalidRequest(f"spec.containers[{container.name}].workingDir: not supported by RunPod")
    for port in container.ports:
        if port.protocol != "TCP":
            raise InvalidRequest(
                f"spec.containers[{container.name}].ports[{port.container_port}].protocol: "
                f"RunPod exposes only TCP/HTTP ports, got {port.protocol}"
            )
    return container


def build_create_body(request: DeploymentRequest, target: Target, settings: RunPodSettings) -> dict[str, Any]:
    """The ``CreatePodRequest`` for ``request`` (see :func:`check_supported` for what is refused)."""
    container = check_supported(request)
    ports: list[str] = []
    for port in container.ports:
        kind = "http" if port.name.lower().startswith("http") else "tcp"
        ports.append(f"{port.container_port}/{kind}")
    env = {var.name: var.value for var in container.env}
    env.update(
        {
            ENV_UID: request.uid,
            ENV_NODE: request.node_name,
            ENV_NAMESPACE: request.namespace,
            ENV_POD_NAME: request.name,
            ENV_CONTAINER: container.name,
        }
    )
    body: dict[str, Any] = {
        "name": pod_name(request.uid),
        "image": container.image,
        "cloud": target.cloud,
        "gpu": {"id": target.gpu_id, "count": request.gpu_count or target.gpu_count},
        "disk": settings.container_disk_gb,
        "env": env,
    }
    if ports:
        body["ports"] = ports
    if target.data_center:
        body["dataCenterIds"] = [target.data_center]
    elif settings.data_centers:
        body["dataCenterIds"] = list(settings.data_centers)
    argv = [*container.command, *container.args]
    if argv:
        body["args"] = shlex.join(argv)
    return body


# --- pod → status -----------------------------------------------------------------------------


class _RuntimePort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    private: int | None = None
    public: int | None = None
    type: str | None = None
    ip: str | None = None


class _Runtime(BaseModel):
    model_config = ConfigDict(extra="ignore")
    ports: list[_RuntimePort] | None = None


class PodView(BaseModel):
    """The fields of a RunPod ``Pod`` this adapter relies on; anything else is ignored."""

    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    status: str
    env: dict[str, str] = {}
    cost: float | None = None
    startedAt: datetime | None = None
    runtime: _Runtime | None = None
    image: str = ""


def identity(pod: Any) -> tuple[str, str] | None:
    """``(uid, node)`` if this raw pod was created by vkprovider, else ``None`` (never raises)."""
    if not isinstance(pod, dict):
        return None
    env = pod.get("env")
    if not isinstance(env, dict):
        return None
    uid, node = env.get(ENV_UID), env.get(ENV_NODE)
    if not isinstance(uid, str) or not isinstance(node, str) or pod.get("name") != pod_name(uid):
        return None
    return uid, node


def parse_pod(provider: str, pod: Any) -> PodView:
    """Validate one pod we own; a response missing fields is logged and raised as ``Transient``."""
    return parse_model(PodView, pod, "pod", provider=provider)


#: RunPod status → (phase, reason); EXITED carries no exit code, so it cannot count as success.
_PHASES: dict[str, tuple[Phase, str]] = {
    "PROVISIONING": (Phase.PENDING, "Provisioning"),
    "STARTING": (Phase.PENDING, "ContainerCreating"),
    "RUNNING": (Phase.RUNNING, ""),
    "EXITED": (Phase.FAILED, "ContainerExited"),
    "ERROR": (Phase.FAILED, "ContainerError"),
    "TERMINATED": (Phase.FAILED, "Terminated"),
}


def status_from_pod(provider: str, pod: PodView) -> DeploymentStatus:
    phase, reason = _PHASES.get(pod.status, (Phase.UNKNOWN, "UnknownProviderState"))
    message = ""
    if phase is Phase.UNKNOWN:
        log.warning("provider %s: pod %s has unknown status %r", provider, pod.id, pod.status)
        message = f"RunPod reported unknown status {pod.status!r}"
    elif phase is Phase.FAILED:
        message = f"RunPod reports the pod {pod.status}"
    ip, endpoint = _address(pod)
    return one_container_status(
        uid=pod.env.get(ENV_UID, ""),
        node_name=pod.env.get(ENV_NODE, ""),
        provider_id=pod.id,
        phase=phase,
        reason=reason,
        message=message,
        container=pod.env.get(ENV_CONTAINER, "main"),
        image=pod.image,
        ip=ip,
        endpoint=endpoint,
        started_at=pod.startedAt,
        price_per_hour=pod.cost,
    )


def _address(pod: PodView) -> tuple[str | None, str | None]:
    """Public IP and ``ip:port`` of the first published port, once the pod is running."""
    if pod.runtime is None or not pod.runtime.ports:
        return None, None
    for port in pod.runtime.ports:
        if port.ip and port.public:
            return port.ip, f"{port.ip}:{port.public}"
    return next((p.ip for p in pod.runtime.ports if p.ip), None), None


def endpoints_from_pod(uid: str, pod: PodView) -> DeploymentEndpoints:
    """Where a client reaches a RUNNING pod: its public IP and each published port's mapping
    (``runtime.ports``: ``private`` container port → ``public`` port on ``ip``).

    A port without a public IP and port (an ``http`` port served only through RunPod's proxy,
    or one not assigned yet) is unreachable by address and left out. RunPod publishes TCP only.
    """
    if pod.status != "RUNNING" or pod.runtime is None or not pod.runtime.ports:
        return DeploymentEndpoints(uid=uid)
    published = [p for p in pod.runtime.ports if p.ip and p.public and p.private]
    if not published:
        return DeploymentEndpoints(uid=uid)
    address = published[0].ip
    assert address is not None
    ports = {
        p.private: PortMapping(container_port=p.private, protocol="TCP", port=p.public)
        for p in published
        if p.ip == address and p.private is not None and p.public is not None
    }
    return DeploymentEndpoints(uid=uid, addresses=[address], ports=list(ports.values()))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
