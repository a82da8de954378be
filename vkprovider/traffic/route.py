"""What a pod records about how its external replica is reached: one annotation, one condition.

The route is written onto the pod (annotation ``vkprovider.io/endpoints``, riding the status
patch) once the provider answers ``endpoints``, so the publisher reads everything it needs from
the pod informer — nothing lives only in memory, a restart rebuilds the slices from the
apiserver, and the provider is asked once per deployment, not per Service or per reconcile.
The condition ``vkprovider.io/ServiceRoute`` says, on the pod, whether the replica is published.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vkprovider.models import DeploymentEndpoints, PortMapping

ANNOTATION_ROUTE = "vkprovider.io/endpoints"
CONDITION_ROUTE = "vkprovider.io/ServiceRoute"
#: Condition reasons: published; the provider has no ``endpoints`` capability or reported no address.
ROUTED = "Routed"
NO_ROUTE = "NoRoute"


@dataclass(frozen=True)
class Route:
    """The route of one deployment (``deployment`` is the provider's id: a redeploy asks again)."""

    provider: str
    deployment: str
    endpoints: DeploymentEndpoints

    def dump(self) -> str:
        """The annotation value: compact, keys sorted, so equal routes are equal strings."""
        body = {
            "provider": self.provider,
            "deployment": self.deployment,
            "addresses": list(self.endpoints.addresses),
            "ports": [
                {"containerPort": m.container_port, "protocol": m.protocol, "port": m.port}
                for m in self.endpoints.ports
            ],
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    def describe(self) -> str:
        """``198.18.0.5 (8000→31000/TCP, …)`` for the condition message."""
        ports = ", ".join(f"{m.container_port}→{m.port}/{m.protocol}" for m in self.endpoints.ports)
        return f"{', '.join(self.endpoints.addresses)} ({ports or 'no ports'})"


def route_of(pod: dict[str, Any]) -> Route | None:
    """The route the pod records, or None (absent or unreadable: an unreadable one is treated as
    absent, so the service asks the provider again and overwrites it)."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_ROUTE)
    if not raw:
        return None
    try:
        body = json.loads(raw)
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        endpoints = DeploymentEndpoints(
            uid=uid,
            addresses=[str(a) for a in body.get("addresses") or []],
            ports=[
                PortMapping(
                    container_port=p["containerPort"], protocol=p.get("protocol", "TCP"), port=p["port"]
                )
                for p in body.get("ports") or []
            ],
        )
        return Route(
            provider=str(body["provider"]), deployment=str(body.get("deployment", "")), endpoints=endpoints
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
