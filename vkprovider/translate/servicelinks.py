"""Service-link environment variables (``FOO_SERVICE_HOST``, Docker-link ``FOO_PORT_80_TCP``...).

A port of the kubelet's ``envvars.FromServices``: only Services with a ClusterIP (not headless,
not ExternalName) contribute. The cluster's own ``kubernetes`` master service from ``default`` is
not added: a pod running on an external cloud cannot reach the cluster IP anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _service_vars(service: Mapping[str, Any]) -> dict[str, str]:
    metadata = service.get("metadata")
    spec = service.get("spec")
    if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
        return {}
    name, ip = metadata.get("name"), spec.get("clusterIP")
    if not isinstance(name, str) or not name or not isinstance(ip, str) or ip in ("", "None"):
        return {}
    raw_ports = spec.get("ports")
    ports = [p for p in raw_ports if isinstance(p, Mapping)] if isinstance(raw_ports, list) else []
    ports = [p for p in ports if isinstance(p.get("port"), int) and not isinstance(p.get("port"), bool)]
    prefix = _env_name(name)
    result = {f"{prefix}_SERVICE_HOST": ip}
    if not ports:
        return result
    result[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
    for port in ports:
        port_name = port.get("name")
        if isinstance(port_name, str) and port_name:
            result[f"{prefix}_SERVICE_PORT_{_env_name(port_name)}"] = str(port["port"])
    first = ports[0]
    first_proto = str(first.get("protocol") or "TCP").lower()
    result[f"{prefix}_PORT"] = f"{first_proto}://{ip}:{first['port']}"
    for port in ports:
        proto = str(port.get("protocol") or "TCP")
        base = f"{prefix}_PORT_{port['port']}_{proto.upper()}"
        result[base] = f"{proto.lower()}://{ip}:{port['port']}"
        result[f"{base}_PROTO"] = proto.lower()
        result[f"{base}_PORT"] = str(port["port"])
        result[f"{base}_ADDR"] = ip
    return result


def service_env(services: list[Mapping[str, Any]]) -> dict[str, str]:
    """All service-link variables, services in name order so the result is deterministic."""
    result: dict[str, str] = {}

    def key(service: Mapping[str, Any]) -> str:
        metadata = service.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        return name if isinstance(name, str) else ""

    for service in sorted((s for s in services if isinstance(s, Mapping)), key=key):
        result.update(_service_vars(service))
    return result
