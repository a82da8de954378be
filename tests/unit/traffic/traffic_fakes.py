"""Pods, Services and a recording API for the EndpointSlice publisher's unit tests."""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

from vkprovider.kube.errors import KubeConflict, KubeNotFound
from vkprovider.models import DeploymentEndpoints, PortMapping
from vkprovider.traffic.route import ANNOTATION_ROUTE, Route

JSON = dict[str, Any]
NODE = "vk-external"
_SLICE = re.compile(r"^/apis/discovery\.k8s\.io/v1/namespaces/([^/]+)/endpointslices(?:/([^/]+))?$")


def route(address: str = "198.18.7.1", ports: dict[int, int] | None = None, *, protocol: str = "TCP") -> str:
    mappings = [
        PortMapping(container_port=c, protocol=protocol, port=p) for c, p in (ports or {8000: 38000}).items()
    ]  # type: ignore[arg-type]
    return Route("cheap", "dep", DeploymentEndpoints(uid="u", addresses=[address], ports=mappings)).dump()


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    route_value: str | None = None,
    ports: list[JSON] | None = None,
    namespace: str = "ns",
    **spec: Any,
) -> JSON:
    annotations = {ANNOTATION_ROUTE: route_value} if route_value is not None else {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels if labels is not None else {"app": "llm"},
            "annotations": annotations,
        },
        "spec": {
            "nodeName": NODE,
            "containers": [
                {
                    "name": "server",
                    "image": "i",
                    "ports": ports if ports is not None else [{"name": "http", "containerPort": 8000}],
                }
            ],
            **spec,
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def service(
    name: str, *, selector: dict[str, str] | None = None, ports: list[JSON] | None = None, **spec: Any
) -> JSON:
    body: JSON = {
        "ports": ports
        if ports is not None
        else [{"name": "web", "port": 80, "targetPort": 8000, "protocol": "TCP"}],
        "clusterIP": "10.96.0.10",
        **spec,
    }
    if selector is not None:
        body["selector"] = selector
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"svc-{name}"}, "spec": body}


class FakeInformer:
    """What the publisher reads of an informer: its cache, ``get`` and ``synced``."""

    def __init__(self, objects: list[JSON]) -> None:
        self.cache = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects}
        self.synced = asyncio.Event()
        self.synced.set()

    def get(self, key: str) -> JSON | None:
        return self.cache.get(key)


class SliceApi:
    """EndpointSlices in memory, with resourceVersions, and every write recorded."""

    def __init__(self) -> None:
        self.slices: dict[tuple[str, str], JSON] = {}
        self.writes: list[tuple[str, str]] = []
        self._rv = 1

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        m = _SLICE.match(path)
        assert m, f"unexpected call {method} {path}"
        namespace, name = m.group(1), m.group(2) or (body or {}).get("metadata", {}).get("name")
        self.writes.append((method, name))
        key = (namespace, name)
        if method == "POST":
            if key in self.slices:
                raise KubeConflict(409, "already exists")
        elif method == "PUT":
            if key not in self.slices:
                raise KubeNotFound(404, "gone")
            if body["metadata"].get("resourceVersion") != self.slices[key]["metadata"]["resourceVersion"]:
                raise KubeConflict(409, "stale")
        elif method == "DELETE":
            if self.slices.pop(key, None) is None:
                raise KubeNotFound(404, "gone")
            return None
        stored = copy.deepcopy(body)
        self._rv += 1
        stored["metadata"]["resourceVersion"] = str(self._rv)
        self.slices[key] = stored
        return copy.deepcopy(stored)  # the apiserver answers a write with the object as stored
