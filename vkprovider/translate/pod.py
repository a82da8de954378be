"""``translate_pod``: a pod (raw API JSON) → a provider-neutral ``DeploymentRequest``.

Pure apart from reads through ``ObjectSource``; fast; and total: any input either translates or
raises ``InvalidRequest`` naming the field (with a kubelet Event reason for missing references).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from pydantic import ValidationError

from vkprovider.errors import InvalidRequest
from vkprovider.gpus import gpu_memory_gb
from vkprovider.models import Container, DeploymentRequest, Port
from vkprovider.translate._fields import flag, integer, invalid, items, obj, required_text, str_map, text
from vkprovider.translate.annotations import forwarded_annotations
from vkprovider.translate.credentials import registry_credentials
from vkprovider.translate.env import expand_command, resolve_env
from vkprovider.translate.gpuspec import gpu_count, gpu_type
from vkprovider.translate.names import check_references, pull_secret_names
from vkprovider.translate.quantity import cpu_cores, memory_bytes
from vkprovider.translate.refs import RefResolver
from vkprovider.translate.servicelinks import service_env
from vkprovider.translate.types import GPU_RESOURCE, ObjectSource, Translation, TranslationEvent
from vkprovider.translate.validate import check_supported
from vkprovider.translate.volumes import Volume, build_volumes, mounts_for

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PROTOCOLS = ("TCP", "UDP", "SCTP")


def _strings(value: Any, path: str) -> list[str]:
    return [text(v, f"{path}[{i}]") for i, v in enumerate(items(value, path))]


def _ports(container: Mapping[str, Any], path: str) -> list[Port]:
    ports: list[Port] = []
    for j, raw in enumerate(items(container.get("ports"), f"{path}.ports")):
        ppath = f"{path}.ports[{j}]"
        port = obj(raw, ppath)
        number = integer(port.get("containerPort"), f"{ppath}.containerPort")
        if number is None or not 1 <= number <= 65535:
            raise invalid(f"{ppath}.containerPort", "must be between 1 and 65535")
        protocol = text(port.get("protocol"), f"{ppath}.protocol", "TCP") or "TCP"
        if protocol not in _PROTOCOLS:
            raise invalid(f"{ppath}.protocol", f"must be one of {', '.join(_PROTOCOLS)}")
        name = text(port.get("name"), f"{ppath}.name")
        ports.append(Port(container_port=number, protocol=cast(Literal["TCP"], protocol), name=name))
    return ports


def _resources(container: Mapping[str, Any], path: str) -> tuple[float, int]:
    """CPU cores and memory bytes requested (requests default to limits, as the API server does)."""
    resources = obj(container.get("resources"), f"{path}.resources")
    requests = obj(resources.get("requests"), f"{path}.resources.requests")
    limits = obj(resources.get("limits"), f"{path}.resources.limits")
    cpu_raw = requests.get("cpu", limits.get("cpu"))
    mem_raw = requests.get("memory", limits.get("memory"))
    cpu = cpu_cores(cpu_raw, f"{path}.resources.requests.cpu") if cpu_raw is not None else 0.0
    memory = memory_bytes(mem_raw, f"{path}.resources.requests.memory") if mem_raw is not None else 0
    return cpu, memory


async def _container(
    pod: Mapping[str, Any],
    raw: Any,
    path: str,
    *,
    node_name: str,
    refs: RefResolver,
    services: Mapping[str, str],
    volumes: Mapping[str, Volume],
) -> Container:
    container = obj(raw, path)
    name = required_text(container.get("name"), f"{path}.name")
    image = required_text(container.get("image"), f"{path}.image")
    env = await resolve_env(pod, container, path, node_name=node_name, refs=refs, services=services)
    cpu, memory = _resources(container, path)
    return Container(
        name=name,
        image=image,
        command=expand_command(_strings(container.get("command"), f"{path}.command"), env),
        args=expand_command(_strings(container.get("args"), f"{path}.args"), env),
        env=env,
        ports=_ports(container, path),
        working_dir=text(container.get("workingDir"), f"{path}.workingDir"),
        cpu=cpu,
        memory_bytes=memory,
        files=mounts_for(container, path, volumes),
    )


def _field_of(error: ValidationError) -> str:
    """Name the failing field without echoing its (possibly secret) input value."""
    first = error.errors()[0]
    return ".".join(str(part) for part in first["loc"]) + f": {first['msg']}"


async def translate_pod(
    pod: Mapping[str, Any],
    *,
    node_name: str,
    source: ObjectSource,
    gpu_resource: str = GPU_RESOURCE,
) -> Translation:
    """Translate completely or raise ``InvalidRequest``; never deploys or mutates anything."""
    if not isinstance(pod, Mapping):
        raise invalid("pod", "expected an object")
    metadata = obj(pod.get("metadata"), "metadata")
    spec = obj(pod.get("spec"), "spec")
    uid = required_text(metadata.get("uid"), "metadata.uid")
    name = required_text(metadata.get("name"), "metadata.name")
    namespace = text(metadata.get("namespace"), "metadata.namespace", "default") or "default"
    check_supported(pod)
    restart_policy = text(spec.get("restartPolicy"), "spec.restartPolicy", "Always") or "Always"
    if restart_policy not in _RESTART_POLICIES:
        raise invalid("spec.restartPolicy", f"must be one of {', '.join(_RESTART_POLICIES)}")

    check_references(pod)  # before any read: no name may walk the API path out of the namespace
    warnings: list[TranslationEvent] = []
    pull_secrets = pull_secret_names(spec, warnings)
    refs = RefResolver(source, namespace)
    services: dict[str, str] = {}
    if flag(spec.get("enableServiceLinks"), "spec.enableServiceLinks", default=True):
        services = service_env(await source.list_services(namespace))
    volumes = await build_volumes(pod, refs, node_name)
    common = {"node_name": node_name, "refs": refs, "services": services, "volumes": volumes}
    containers = [
        await _container(pod, c, f"spec.containers[{i}]", **common)  # type: ignore[arg-type]
        for i, c in enumerate(items(spec.get("containers"), "spec.containers"))
    ]
    init_containers = [
        await _container(pod, c, f"spec.initContainers[{i}]", **common)  # type: ignore[arg-type]
        for i, c in enumerate(items(spec.get("initContainers"), "spec.initContainers"))
    ]
    gpus = gpu_count(spec, gpu_resource)
    gpu = gpu_type(pod, warnings)
    credentials = await registry_credentials(pull_secrets, refs, warnings)
    try:
        request = DeploymentRequest(
            uid=uid,
            namespace=namespace,
            name=name,
            node_name=node_name,
            containers=containers,
            init_containers=init_containers,
            gpu_type=gpu,
            gpu_count=gpus,
            gpu_memory_gb=gpu_memory_gb(gpu) if gpu else 0.0,
            restart_policy=cast(Literal["Always"], restart_policy),
            registry_credentials=credentials,
            labels=str_map(metadata.get("labels"), "metadata.labels"),
            annotations=forwarded_annotations(str_map(metadata.get("annotations"), "metadata.annotations")),
        )
    except ValidationError as exc:
        raise InvalidRequest(f"pod: {_field_of(exc)}") from None
    return Translation(request=request, warnings=refs.warnings + warnings)
