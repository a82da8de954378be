"""Pod features a virtual node cannot honour, refused up front with the field named.

Runs before anything is resolved or deployed, so a pod is either translated completely or
rejected with one clear reason; nothing is ever deployed half-way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vkprovider.translate._fields import flag, integer, invalid, items, obj, text

_HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def _check_container(container: Mapping[str, Any], path: str, *, init: bool) -> None:
    security = obj(container.get("securityContext"), f"{path}.securityContext")
    if flag(security.get("privileged"), f"{path}.securityContext.privileged"):
        raise invalid(f"{path}.securityContext.privileged", "privileged containers are not supported")
    for j, port in enumerate(items(container.get("ports"), f"{path}.ports")):
        port = obj(port, f"{path}.ports[{j}]")
        if integer(port.get("hostPort"), f"{path}.ports[{j}].hostPort"):
            raise invalid(f"{path}.ports[{j}].hostPort", "host ports are not supported on a virtual node")
    if init and text(container.get("restartPolicy"), f"{path}.restartPolicy") == "Always":
        raise invalid(f"{path}.restartPolicy", "sidecar (restartable init) containers are not supported")


def check_supported(pod: Mapping[str, Any]) -> None:
    spec = obj(pod.get("spec"), "spec")
    for key in _HOST_NAMESPACES:
        if flag(spec.get(key), f"spec.{key}"):
            raise invalid(f"spec.{key}", f"{key} is not supported on a virtual node")
    if items(spec.get("ephemeralContainers"), "spec.ephemeralContainers"):
        raise invalid("spec.ephemeralContainers", "ephemeral containers are not supported on a virtual node")
    containers = items(spec.get("containers"), "spec.containers")
    if not containers:
        raise invalid("spec.containers", "at least one container is required")
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(items(spec.get(kind), f"spec.{kind}")):
            path = f"spec.{kind}[{i}]"
            _check_container(obj(container, path), path, init=kind == "initContainers")
