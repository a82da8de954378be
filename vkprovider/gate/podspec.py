"""What a pod asks of a node, as kube-scheduler reads it: requests of every resource kind, host
ports, and whether its volumes are ones the gate can judge.

``vkprovider.gate.view.pod_demand`` counts one resource (the GPU signal); the fit engine needs
all of them (CPU, memory, ephemeral storage, every extended resource such as
``nvidia.com/gpu`` or ``amd.com/gpu``, and the pod slot itself), with the scheduler's rule for
init and sidecar containers.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from vkprovider.errors import InvalidRequest
from vkprovider.translate.quantity import parse_quantity

JSON = Mapping[str, Any]
Resources = dict[str, Decimal]

#: Volumes that carry no placement constraint of their own: the node only has to exist.
#: Anything else (a PVC and its volume topology, CSI inline, ephemeral claims …) the gate cannot
#: judge from its caches, so such a pod is "does not fit" (a conservative answer).
NODE_LOCAL_VOLUMES = frozenset(
    {"emptyDir", "configMap", "secret", "downwardAPI", "projected", "hostPath", "image"}
)


def _amounts(container: JSON) -> Resources:
    res = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    out: Resources = {}
    for name in {*requests, *limits}:
        raw = requests.get(name, limits.get(name))  # a limit alone is the request
        try:
            out[name] = parse_quantity(raw, name)
        except InvalidRequest:
            continue  # the API server never stores one; ignore rather than crash the gate
    return out


def _add(into: Resources, more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Decimal(0)) + amount


def pod_requests(pod: JSON) -> Resources:
    """The scheduler's effective request (``resourcehelper.PodRequests``): the containers plus
    sidecars (restartable init containers), or the largest regular init container together with
    the sidecars started before it, whichever is larger per resource; plus overhead; plus one
    ``pods`` slot."""
    spec = pod.get("spec") or {}
    total: Resources = defaultdict(Decimal)
    for c in spec.get("containers") or []:
        _add(total, _amounts(c))
    sidecars: Resources = defaultdict(Decimal)
    peak: Resources = defaultdict(Decimal)
    for c in spec.get("initContainers") or []:
        amounts = _amounts(c)
        if c.get("restartPolicy") == "Always":
            _add(sidecars, amounts)
            _add(total, amounts)
            continue
        for name in {*amounts, *sidecars}:
            peak[name] = max(peak[name], amounts.get(name, Decimal(0)) + sidecars.get(name, Decimal(0)))
    out = {name: max(total.get(name, Decimal(0)), peak.get(name, Decimal(0))) for name in {*total, *peak}}
    for name, raw in (spec.get("overhead") or {}).items():
        try:
            out[name] = out.get(name, Decimal(0)) + parse_quantity(raw, name)
        except InvalidRequest:
            continue
    out["pods"] = Decimal(1)
    return out


def host_ports(pod: JSON) -> set[tuple[str, str, int]]:
    """(protocol, host IP, port) of every host port the pod's containers and sidecars bind."""
    spec = pod.get("spec") or {}
    containers = [
        *(spec.get("containers") or []),
        *(c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"),
    ]
    found = set()
    for c in containers:
        for port in c.get("ports") or []:
            if int(port.get("hostPort") or 0) > 0:
                ip = port.get("hostIP") or "0.0.0.0"
                found.add((port.get("protocol") or "TCP", ip, int(port["hostPort"])))
    return found


def ports_conflict(wanted: set[tuple[str, str, int]], used: set[tuple[str, str, int]]) -> bool:
    """The ``NodePorts`` rule: same protocol and port, and the same IP or either is 0.0.0.0."""
    return any(
        p == q and proto == proto2 and (ip == ip2 or "0.0.0.0" in (ip, ip2))
        for proto, ip, p in wanted
        for proto2, ip2, q in used
    )


def unjudged_volumes(pod: JSON) -> list[str]:
    """Names of the volumes whose kind the gate cannot evaluate (see ``NODE_LOCAL_VOLUMES``)."""
    bad = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds or not kinds <= NODE_LOCAL_VOLUMES:
            bad.append(str(volume.get("name", "?")))
    return bad


def replacement(pod: JSON, *, pinned_node: str = "") -> dict[str, Any]:
    """The pod its controller would create in its place: the same spec and labels, unbound
    (``spec.nodeName`` dropped, unless the controller's template pins it: then it stays,
    and the replacement can only go where the template says)."""
    meta = pod.get("metadata") or {}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    spec.pop("nodeName", None)
    if pinned_node:
        spec["nodeName"] = pinned_node
    return {
        "metadata": {
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "labels": dict(meta.get("labels") or {}),
        },
        "spec": spec,
    }
