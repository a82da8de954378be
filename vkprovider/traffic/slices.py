"""The EndpointSlices one Service should have for the external replicas it selects (pure).

This mirrors kube-controller-manager's EndpointSlice controller (``k8s.io/endpointslice``
v0.36) where it applies — selector match, target port by number or by container-port name,
``publishNotReadyAddresses``, ready/serving/terminating from the pod, ``hostname`` for a
subdomain, endpoints grouped by their port set, at most ``max_per_slice`` per slice, the
``headless`` label — with one difference that is the point: the address is the one the provider
reports (``Route``) and each port is the port the provider maps the target container port to.
Replicas of one provider often share a port set; ones with different mappings (RunPod, Vast.ai
give each instance its own public ports) get a slice each, as the controller does for pods whose
named ports resolve differently.

Slices are named deterministically (Service name + a hash of address type, ports and chunk), so
a restart finds the same names and rewrites nothing that is already right.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Iterable
from typing import Any

from vkprovider.traffic.route import Route, route_of

JSON = dict[str, Any]
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_HEADLESS = "service.kubernetes.io/headless"
#: Our ``managed-by`` value: the built-in controller ignores slices that carry another one.
MANAGED_BY = "vkprovider.io"
#: Which virtual node's vkprovider owns a slice (two nodes never touch each other's slices).
LABEL_NODE = "vkprovider.io/node-name"


def node_label_value(node_name: str) -> str:
    """``node_name`` if it is a valid label value (≤ 63 chars), else a stable short hash."""
    if len(node_name) <= 63:
        return node_name
    return "n-" + hashlib.sha256(node_name.encode()).hexdigest()[:20]


def selects(service: JSON, pod: JSON) -> bool:
    """The Service's selector matches the pod (same namespace; an empty selector matches nothing:
    a Service without one is the user's own to fill)."""
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector or (service.get("spec") or {}).get("type") == "ExternalName":
        return False
    if pod["metadata"].get("namespace") != service["metadata"].get("namespace"):
        return False
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def is_terminal(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _container_port(pod: JSON, target: Any, protocol: str) -> int | None:
    """The container port a Service port's ``targetPort`` names (client-go's ``FindPort``)."""
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in pod["spec"].get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: JSON, pod: JSON, route: Route) -> list[JSON]:
    """One slice port per Service port the replica can serve: the Service port's name, protocol
    and appProtocol, and the port the provider maps the target container port to. A Service port
    whose target the pod does not have, or whose container port the provider does not publish,
    is left out for this replica (the controller leaves out an unresolvable named port too)."""
    ports: list[JSON] = []
    for sp in (service.get("spec") or {}).get("ports") or []:
        protocol = sp.get("protocol", "TCP")
        target = sp.get("targetPort", sp.get("port"))
        container_port = _container_port(pod, target, protocol)
        if container_port is None:
            continue
        mapped = route.endpoints.port_for(container_port, protocol)
        if mapped is None:
            continue
        port: JSON = {"name": sp.get("name", ""), "port": mapped, "protocol": protocol}
        if sp.get("appProtocol"):
            port["appProtocol"] = sp["appProtocol"]
        ports.append(port)
    return sorted(ports, key=lambda p: (p["name"], p["protocol"]))


_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def address_type(address: str) -> str | None:
    """``IPv4``/``IPv6``/``FQDN`` (a DNS name; kube-proxy routes only IP slices), or None for
    something no EndpointSlice accepts (the apiserver would refuse the whole slice)."""
    try:
        return "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"
    except ValueError:
        ok = len(address) <= 253 and _DNS_NAME.fullmatch(address) is not None
        return "FQDN" if ok else None


#: ``spec.trafficDistribution`` values for which the EndpointSlice controller (``trafficdist``)
#: writes hints, and kube-proxy then prefers endpoints hinted for its own zone (or node).
CLOSE_DISTRIBUTIONS = frozenset({"PreferClose", "PreferSameZone", "PreferSameNode"})


def hints(service: JSON, ready: bool, zone: str | None, node_name: str) -> JSON | None:
    """The hints the controller's ``preferCloseHeuristic`` would write for this endpoint: for a
    ready one of a Service with a close ``trafficDistribution``, its zone (and for
    ``PreferSameNode`` its node). kube-proxy uses zone hints only while *every* ready endpoint
    has one and one is hinted for its own zone: so while a local replica is ready in the
    client's zone, ours (hinted for the virtual node's own zone) get no traffic from it, and
    once none is, every endpoint is used again."""
    distribution = (service.get("spec") or {}).get("trafficDistribution")
    if not ready or distribution not in CLOSE_DISTRIBUTIONS:
        return None
    found: JSON = {}
    if zone:
        found["forZones"] = [{"name": zone}]
    if distribution == "PreferSameNode":
        found["forNodes"] = [{"name": node_name}]
    return found or None


def _endpoint(service: JSON, pod: JSON, address: str, node_name: str, zone: str | None = None) -> JSON:
    meta = pod["metadata"]
    publish_not_ready = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    serving = is_ready(pod)
    terminating = meta.get("deletionTimestamp") is not None
    # As the controller: never ready while terminating, unless publishNotReadyAddresses.
    ready = publish_not_ready or (serving and not terminating)
    endpoint: JSON = {
        "addresses": [address],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "nodeName": node_name,
        "targetRef": {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
    }
    if zone:
        endpoint["zone"] = zone
    found = hints(service, ready, zone, node_name)
    if found is not None:
        endpoint["hints"] = found
    spec = pod.get("spec") or {}
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        endpoint["hostname"] = spec["hostname"]
    return endpoint


def published_pods(service: JSON, pods: Iterable[JSON]) -> list[tuple[JSON, Route]]:
    """The pods of ``pods`` the Service selects that have a route with an address, by name."""
    found = []
    for pod in pods:
        if is_terminal(pod) or not selects(service, pod):
            continue
        route = route_of(pod)
        if route is not None and route.endpoints.addresses:
            found.append((pod, route))
    return sorted(found, key=lambda pr: str(pr[0]["metadata"]["name"]))


def slice_name(service_name: str, kind: str, ports: list[JSON], chunk: int) -> str:
    digest = hashlib.sha256(json.dumps([kind, ports, chunk], sort_keys=True).encode()).hexdigest()[:10]
    return f"{service_name[:200]}-vk-{digest}"


def desired_slices(
    service: JSON, pods: Iterable[JSON], node_name: str, *, max_per_slice: int = 100, zone: str | None = None
) -> dict[str, JSON]:
    """``name → EndpointSlice`` for ``service`` (an empty dict when it selects no routed replica);
    ``zone`` is the virtual node's ``topology.kubernetes.io/zone``, as the controller copies a
    pod's node zone onto its endpoint."""
    groups: dict[tuple[str, str], tuple[list[JSON], list[JSON]]] = {}
    for pod, route in published_pods(service, pods):
        ports = endpoint_ports(service, pod, route)
        for address in route.endpoints.addresses:
            kind = address_type(address)
            if kind is None:
                continue
            key = (kind, json.dumps(ports, sort_keys=True))
            groups.setdefault(key, (ports, []))[1].append(_endpoint(service, pod, address, node_name, zone))
    meta = service["metadata"]
    labels = {
        LABEL_SERVICE_NAME: meta["name"],
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_NODE: node_label_value(node_name),
    }
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[LABEL_HEADLESS] = ""
    owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"], "uid": meta["uid"]}
    result: dict[str, JSON] = {}
    for (kind, _), (ports, endpoints) in sorted(groups.items()):
        for chunk, start in enumerate(range(0, len(endpoints), max_per_slice)):
            name = slice_name(meta["name"], kind, ports, chunk)
            result[name] = {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": dict(labels),
                    "ownerReferences": [owner],
                },
                "addressType": kind,
                "endpoints": endpoints[start : start + max_per_slice],
                "ports": ports,
            }
    return result


def differs(existing: JSON, desired: JSON) -> bool:
    """True when ``existing`` (as read back) does not show ``desired``: compared on what we set,
    so defaults the apiserver adds or fields others add never cause a write."""
    if existing.get("addressType") != desired["addressType"]:
        return True
    meta, want = existing.get("metadata") or {}, desired["metadata"]
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in want["labels"].items()):
        return True
    owners = {(o.get("kind"), o.get("name"), o.get("uid")) for o in meta.get("ownerReferences") or []}
    if not {(o["kind"], o["name"], o["uid"]) for o in want["ownerReferences"]} <= owners:
        return True
    return _normal_ports(existing.get("ports")) != _normal_ports(desired["ports"]) or _normal_endpoints(
        existing.get("endpoints")
    ) != _normal_endpoints(desired["endpoints"])


def _normal_ports(ports: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (p.get("name") or "", p.get("port"), p.get("protocol") or "TCP", p.get("appProtocol") or "")
        for p in ports or []
    )


def _normal_endpoints(endpoints: Any) -> list[tuple[Any, ...]]:
    def one(e: JSON) -> tuple[Any, ...]:
        c = e.get("conditions") or {}
        ref = e.get("targetRef") or {}
        return (
            tuple(e.get("addresses") or []),
            bool(c.get("ready")),
            bool(c.get("serving")),
            bool(c.get("terminating")),
            e.get("nodeName") or "",
            e.get("hostname") or "",
            e.get("zone") or "",
            json.dumps(e.get("hints") or None, sort_keys=True),
            ref.get("uid") or "",
            ref.get("name") or "",
        )

    return sorted(one(e) for e in endpoints or [])
