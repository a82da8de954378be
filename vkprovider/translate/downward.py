"""Downward API values: ``fieldRef`` and ``resourceFieldRef`` as the kubelet computes them.

Used for env vars and for downwardAPI volume files. ``status.hostIP``/``status.podIP`` are empty
before the provider has placed the pod: the deployment is created before any IP exists.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from vkprovider.translate._fields import invalid, items, obj, text
from vkprovider.translate.quantity import parse_quantity

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
_SIMPLE = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "metadata.uid": ("metadata", "uid"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.hostIP": ("status", "hostIP"),
    "status.podIP": ("status", "podIP"),
}
_RESOURCES = {"limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}


def _format_map(values: Mapping[str, Any]) -> str:
    """The kubelet's ``FormatMap``: sorted ``key="value"`` lines (for whole-map volume files)."""
    return "\n".join(f'{key}="{values[key]}"' for key in sorted(values))


def field_value(pod: Mapping[str, Any], field_ref: Mapping[str, Any], path: str, node_name: str) -> str:
    field_path = text(field_ref.get("fieldPath"), f"{path}.fieldPath")
    metadata = obj(pod.get("metadata"), "metadata")
    if field_path == "spec.nodeName":
        return node_name
    if field_path in _SIMPLE:
        section, key = _SIMPLE[field_path]
        return text(obj(pod.get(section), section).get(key), field_path)
    if field_path in ("status.podIPs", "status.hostIPs"):
        entries = items(obj(pod.get("status"), "status").get(field_path[7:]), field_path)
        return ",".join(text(obj(e, field_path).get("ip"), field_path) for e in entries)
    if field_path in ("metadata.labels", "metadata.annotations"):
        return _format_map(obj(metadata.get(field_path[9:]), field_path))
    match = _SUBSCRIPT.match(field_path)
    if match:
        values = obj(metadata.get(match.group(1)), f"metadata.{match.group(1)}")
        return text(values.get(match.group(2)), field_path)
    raise invalid(f"{path}.fieldPath", f"unsupported field path {field_path!r}")


def _container_resources(pod: Mapping[str, Any], container_name: str, path: str) -> Mapping[str, Any]:
    spec = obj(pod.get("spec"), "spec")
    for kind in ("containers", "initContainers"):
        for container in items(spec.get(kind), f"spec.{kind}"):
            container = obj(container, f"spec.{kind}")
            if container.get("name") == container_name:
                return obj(container.get("resources"), f"spec.{kind}.resources")
    raise invalid(f"{path}.containerName", f'container "{container_name}" not found in the pod')


def resource_value(
    pod: Mapping[str, Any], ref: Mapping[str, Any], path: str, default_container: str | None
) -> str:
    """``ceil(value / divisor)``; a missing limit falls back to the request (there is no node
    allocatable to default to on a virtual node), then to 0."""
    resource = text(ref.get("resource"), f"{path}.resource")
    if resource not in _RESOURCES:
        raise invalid(f"{path}.resource", f"unsupported resource {resource!r}")
    container_name = text(ref.get("containerName"), f"{path}.containerName") or default_container
    if not container_name:
        raise invalid(f"{path}.containerName", "required in a downwardAPI volume")
    resources = _container_resources(pod, container_name, path)
    kind, name = resource.split(".")
    raw = obj(resources.get(kind), kind).get(name)
    if raw is None and kind == "limits":
        raw = obj(resources.get("requests"), "requests").get(name)
    value = parse_quantity(raw, f"{path} ({resource})") if raw is not None else Decimal(0)
    divisor = parse_quantity(ref.get("divisor", "1"), f"{path}.divisor")
    if divisor <= 0:
        raise invalid(f"{path}.divisor", "must be positive")
    if name == "cpu":
        return str(math.ceil((value * 1000).to_integral_value("ROUND_CEILING") / (divisor * 1000)))
    return str(math.ceil(value / divisor))
