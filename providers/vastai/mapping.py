"""Pure translation between vkprovider models and Vast.ai shapes.

Identity: a Vast.ai instance has one free-text ``label`` (filterable, echoed on every read), so
each instance is labelled ``vkprovider:<node name>:<pod uid>``; neither part can contain ``:``.
``list(node)`` keeps instances whose label names that node, ``get(uid)`` the one naming that
uid. The env also carries ``VKPROVIDER_*`` variables for the workload's benefit.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from vkprovider.plugins.api import (
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    Offer,
    Phase,
    PortMapping,
    RegistryCredential,
    normalize_catalog_gpu,
    one_container_status,
    parse_model,
)

from .settings import VastAiSettings

log = logging.getLogger(__name__)

LABEL_PREFIX = "vkprovider"
ENV_CONTAINER = "VKPROVIDER_CONTAINER_NAME"


def label_for(node: str, uid: str) -> str:
    return f"{LABEL_PREFIX}:{node}:{uid}"


def parse_label(label: Any) -> tuple[str, str] | None:
    """``(uid, node)`` from a label we wrote, else ``None`` (never raises)."""
    if not isinstance(label, str):
        return None
    parts = label.split(":")
    if len(parts) != 3 or parts[0] != LABEL_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[2], parts[1]


@dataclass(frozen=True)
class Ask:
    """An offer to accept: the ask id and whether it is rented as an interruptible bid."""

    ask_id: int
    bid: bool = False

    @property
    def offer_id(self) -> str:
        return f"{self.ask_id}:bid" if self.bid else str(self.ask_id)

    @classmethod
    def parse(cls, offer_id: str) -> Ask:
        ask, _, kind = offer_id.partition(":")
        if not ask.isdigit() or kind not in ("", "bid"):
            raise InvalidRequest(f"offer_id {offer_id!r} is not a Vast.ai offer id (<ask id>[:bid])")
        return cls(int(ask), kind == "bid")


# --- offer search -------------------------------------------------------------------------------


def search_query(
    settings: VastAiSettings, *, bid: bool, gpu_names: list[str] | None = None
) -> dict[str, Any]:
    """The ``POST /api/v0/bundles`` body: filters as ``{op: value}`` objects, cheapest first."""
    query: dict[str, Any] = {
        "limit": settings.search_limit,
        "type": "bid" if bid else "ondemand",
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "reliability": {"gte": settings.min_reliability},
        # the spec pins ``order`` to exactly two [field, direction] entries
        "order": [["dph_total", "asc"], ["reliability", "desc"]],
        "allocated_storage": settings.disk_gb,
    }
    if settings.verified_only:
        query["verified"] = {"eq": True}
    names = gpu_names if gpu_names is not None else settings.gpu_names
    if names:
        query["gpu_name"] = {"in": list(names)}
    if settings.num_gpus:
        query["num_gpus"] = {"in": list(settings.num_gpus)}
    if settings.countries:
        query["geolocation"] = {"in": list(settings.countries)}
    if settings.max_price_per_hour is not None:
        query["dph_total"] = {"lte": settings.max_price_per_hour}
    return query


def offer_from_bundle(provider: str, bundle: Any, *, bid: bool, settings: VastAiSettings) -> Offer | None:
    """One search result → ``Offer`` (``gpu_ram``/``cpu_ram`` are MB); malformed → ``None``, logged."""
    try:
        ask_id = int(bundle["id"])
        gpu_name = str(bundle["gpu_name"])
        count = int(bundle["num_gpus"])
        memory_gb = float(bundle.get("gpu_ram") or 0) / 1024
        price = float(bundle["min_bid"]) * settings.bid_multiplier if bid else float(bundle["dph_total"])
    except (KeyError, TypeError, ValueError):
        log.warning("provider %s: skipping malformed offer (id=%r)", provider, _get(bundle, "id"))
        return None
    location = str(bundle.get("geolocation") or "")
    return Offer(
        provider=provider,
        offer_id=Ask(ask_id, bid).offer_id,
        gpu_type=normalize_catalog_gpu(gpu_name, memory_gb),
        gpu_count=count,
        gpu_memory_gb=round(memory_gb, 1),
        region=location.rsplit(",", 1)[-1].strip() if location else "",
        price_per_hour=round(max(price, 0.0), 6),
        capacity=1 if bundle.get("rentable", True) and not bundle.get("rented", False) else 0,
        spot=bid,
        cpu=float(bundle.get("cpu_cores_effective") or 0),
        memory_gb=round(float(bundle.get("cpu_ram") or 0) / 1024, 1),
    )


# --- request → create body ----------------------------------------------------------------------


def build_create_body(
    request: DeploymentRequest, settings: VastAiSettings, bid_price: float | None
) -> dict[str, Any]:
    """The ``PUT /api/v0/asks/{id}`` body; unsupported features raise ``InvalidRequest`` first."""
    if len(request.containers) != 1:
        raise InvalidRequest(
            f"spec.containers: a Vast.ai instance runs exactly one container, got {len(request.containers)}"
        )
    if request.init_containers:
        raise InvalidRequest("spec.initContainers: Vast.ai instances have no init containers")
    container = request.containers[0]
    if container.files:
        raise InvalidRequest(
            f"spec.containers[{container.name}].volumeMounts: Vast.ai cannot deliver ConfigMap/Secret files"
        )
    if container.working_dir:
        raise InvalidRequest(f"spec.containers[{container.name}].workingDir: not supported by Vast.ai")
    flags: list[str] = []
    for port in container.ports:
        if port.protocol == "SCTP":
            raise InvalidRequest(
                f"spec.containers[{container.name}].ports[{port.container_port}].protocol: SCTP is not supported"
            )
        suffix = "/udp" if port.protocol == "UDP" else ""
        flags.append(f"-p {port.container_port}:{port.container_port}{suffix}")
    env = {var.name: var.value for var in container.env}
    env.update(
        {
            "VKPROVIDER_POD_UID": request.uid,
            "VKPROVIDER_NODE_NAME": request.node_name,
            "VKPROVIDER_POD_NAMESPACE": request.namespace,
            "VKPROVIDER_POD_NAME": request.name,
            ENV_CONTAINER: container.name,
        }
    )
    flags.extend(f"-e {shlex.quote(f'{name}={value}')}" for name, value in env.items())
    body: dict[str, Any] = {
        "image": container.image,
        "label": label_for(request.node_name, request.uid),
        "disk": settings.disk_gb,
        "runtype": "args",
        "target_state": "running",
        "cancel_unavail": True,
        "env": " ".join(flags),
    }
    argv = [*container.command, *container.args]
    if argv:
        body["args"] = argv
    if bid_price is not None:
        body["price"] = round(min(max(bid_price, 0.001), 128.0), 6)
    login = _image_login(container.image, request.registry_credentials)
    if login:
        body["image_login"] = login
    return body


def _image_login(image: str, credentials: list[RegistryCredential]) -> str | None:
    """Docker-login flags for the credential matching the image's registry (``-u U -p P server``)."""
    if not credentials:
        return None
    first = image.split("/", 1)[0]
    registry = (
        first if "/" in image and ("." in first or ":" in first or first == "localhost") else "docker.io"
    )
    match = next((c for c in credentials if c.server.removeprefix("https://").rstrip("/") == registry), None)
    chosen = match or credentials[0]
    return f"-u {shlex.quote(chosen.username)} -p {shlex.quote(chosen.password)} {shlex.quote(chosen.server)}"


# --- instance → status --------------------------------------------------------------------------


class InstanceView(BaseModel):
    """The fields of a Vast.ai instance this adapter relies on; anything else is ignored."""

    model_config = ConfigDict(extra="ignore")
    id: int
    actual_status: str | None
    intended_status: str | None = None
    label: str | None = None
    status_msg: str | None = None
    public_ipaddr: str | None = None
    ports: Any = None
    dph_total: float | None = None
    start_date: float | None = None
    image_uuid: str | None = None
    extra_env: Any = None


def parse_instance(provider: str, raw: Any) -> InstanceView:
    """Validate one instance we own; a response missing fields is logged and raised ``Transient``."""
    return parse_model(InstanceView, raw, "instance", provider=provider)


#: ``actual_status`` → (phase, reason). The spec: exited/unknown/offline never reach running.
_PHASES: dict[str | None, tuple[Phase, str]] = {
    None: (Phase.PENDING, "Scheduling"),
    "": (Phase.PENDING, "Scheduling"),
    "scheduling": (Phase.PENDING, "Scheduling"),
    "created": (Phase.PENDING, "ContainerCreating"),
    "loading": (Phase.PENDING, "ContainerCreating"),
    "running": (Phase.RUNNING, ""),
    "exited": (Phase.FAILED, "ContainerExited"),
    "offline": (Phase.FAILED, "HostOffline"),
    "unknown": (Phase.UNKNOWN, "ProviderLostTrack"),
}


def status_from_instance(provider: str, instance: InstanceView) -> DeploymentStatus:
    phase, reason = _PHASES.get(instance.actual_status, (Phase.UNKNOWN, "UnknownProviderState"))
    if reason == "UnknownProviderState":
        log.warning(
            "provider %s: instance %s has unknown actual_status %r",
            provider,
            instance.id,
            instance.actual_status,
        )
    message = instance.status_msg or ""
    identity = parse_label(instance.label) or ("", "")
    started = datetime.fromtimestamp(instance.start_date, UTC) if instance.start_date else None
    return one_container_status(
        uid=identity[0],
        node_name=identity[1],
        provider_id=str(instance.id),
        phase=phase,
        reason=reason,
        message=message,
        container=_env(instance.extra_env).get(ENV_CONTAINER, "main"),
        container_message=message,
        image=instance.image_uuid or "",
        ip=instance.public_ipaddr or None,
        endpoint=_endpoint(instance),
        started_at=started if phase is Phase.RUNNING else None,
        price_per_hour=instance.dph_total,
    )


def _endpoint(instance: InstanceView) -> str | None:
    """``ip:host-port`` of the first published TCP port (``ports`` is a Docker-style map)."""
    if not instance.public_ipaddr or not isinstance(instance.ports, dict):
        return None
    for key in sorted(instance.ports):
        bindings = instance.ports[key]
        if str(key).endswith("/tcp") and not str(key).startswith("22/") and isinstance(bindings, list):
            for binding in bindings:
                if isinstance(binding, dict) and binding.get("HostPort"):
                    return f"{instance.public_ipaddr}:{binding['HostPort']}"
    return None


def endpoints_from_instance(uid: str, instance: InstanceView) -> DeploymentEndpoints:
    """Where a client reaches a running instance: ``public_ipaddr`` and, per container port,
    the host port Docker mapped it to (``ports``: ``{"8080/tcp": [{"HostPort": "40123"}]}``).

    Nothing before the instance runs (``ports`` is only present on running instances) or
    without a public address; a key or binding that does not parse is left out.
    """
    if (
        instance.actual_status != "running"
        or not instance.public_ipaddr
        or not isinstance(instance.ports, dict)
    ):
        return DeploymentEndpoints(uid=uid)
    ports: dict[tuple[int, str], PortMapping] = {}
    for key, bindings in instance.ports.items():
        number, _, proto = str(key).partition("/")
        protocol = (proto or "tcp").upper()
        if not number.isdigit() or protocol not in ("TCP", "UDP") or not isinstance(bindings, list):
            continue
        host_ports = [
            str(b.get("HostPort"))
            for b in bindings
            if isinstance(b, dict) and str(b.get("HostPort")).isdigit()
        ]
        if host_ports and 0 < int(number) < 65536 and 0 < int(host_ports[0]) < 65536:
            ports[(int(number), protocol)] = PortMapping(
                container_port=int(number),
                protocol=protocol,  # type: ignore[arg-type]  # checked against TCP/UDP above
                port=int(host_ports[0]),
            )
    return DeploymentEndpoints(uid=uid, addresses=[instance.public_ipaddr], ports=list(ports.values()))


def _env(extra_env: Any) -> dict[str, str]:
    """``extra_env`` is ``[[k, v], ...]`` in the list endpoint and ``["K=V", ...]`` in the show one."""
    env: dict[str, str] = {}
    if not isinstance(extra_env, list):
        return env
    for item in extra_env:
        if isinstance(item, list) and len(item) == 2:
            env[str(item[0])] = str(item[1])
        elif isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            env[key] = value
    return env


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None
