"""The Node object the agent advertises, built as plain JSON from config and current state.

Pure functions only: the agent decides *when* to write, this module decides *what*. The shape
follows the Go virtual-kubelet library (DESIGN §4.1) so schedulers, descheduler and runbooks see
a familiar node: the ``type=virtual-kubelet`` label, the ``virtual-kubelet.io/provider`` taint,
capacity equal to allocatable, kubelet-style conditions and a daemon endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vkprovider.config import NodeConfig
from vkprovider.kube.gate_heartbeat import MAX_GPUS_PER_POD_LABEL
from vkprovider.node.conditions import Condition, Reachability
from vkprovider.placement.health import TAINT_UNAVAILABLE
from vkprovider.taint_config import CONFIG_TAINTS_ANNOTATION
from vkprovider.traffic.config import ZONE_LABEL

JSON = dict[str, Any]

PROVIDER_NAME = "vkprovider"
KUBELET_VERSION = "v1.36.3-vkprovider"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_LABEL_PREFIX = "gpu.vkprovider.io/"
TAINT_PROVIDER = "virtual-kubelet.io/provider"
#: The taint keys this agent always owns; with the node's configured ``taints`` (``owned_keys``)
#: the only ones it adds or removes: every other taint belongs to someone else (the capacity
#: gate's ``local-capacity``, the node-lifecycle controller's ``node.kubernetes.io/*``).
OWNED_TAINT_KEYS = frozenset({TAINT_PROVIDER, TAINT_UNAVAILABLE})

_LABEL_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_LABEL_NAME_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


@dataclass(frozen=True)
class NodeState:
    """What the node should say right now; equality means "nothing to write"."""

    ready: bool
    gpus: int
    gpu_types: frozenset[str] = field(default_factory=frozenset)
    breaker_open: bool = False
    not_ready_message: str = ""
    reachability: Reachability = field(default_factory=Reachability)
    max_gpus_per_pod: int | None = None  #: the largest listed offer's GPU count (None: no offers)


def gpu_label_key(gpu_type: str) -> str | None:
    """``gpu.vkprovider.io/<GPU-TYPE>``, with the name part forced into a valid label name
    (alphanumeric ends, ``[-._A-Za-z0-9]`` inside, at most 63 characters); None if nothing is left."""
    name = _LABEL_NAME_BAD.sub("-", gpu_type.strip())
    name = _LABEL_NAME_EDGE.sub("", name)[:63]
    name = _LABEL_NAME_EDGE.sub("", name)
    return GPU_LABEL_PREFIX + name if name else None


def node_labels(
    cfg: NodeConfig, gpu_types: Iterable[str], max_gpus_per_pod: int | None = None
) -> dict[str, str]:
    labels = {
        "type": "virtual-kubelet",
        "kubernetes.io/role": "agent",
        "kubernetes.io/hostname": cfg.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **({ZONE_LABEL: cfg.zone} if cfg.zone else {}),  # a zone of its own (docs/virtual-node.md)
        **cfg.labels,
    }
    for gpu in gpu_types:
        key = gpu_label_key(gpu)
        if key is not None:
            labels[key] = "true"
    if max_gpus_per_pod is not None:
        labels[MAX_GPUS_PER_POD_LABEL] = str(max_gpus_per_pod)
    return labels


def owned_taints(breaker_open: bool, cfg: NodeConfig | None = None) -> list[JSON]:
    """Our taints: the provider taint, the outage taint while the breaker is open, and the
    node's configured ``taints`` (``vkprovider.taint_config``)."""
    taints: list[JSON] = [{"key": TAINT_PROVIDER, "value": PROVIDER_NAME, "effect": "NoSchedule"}]
    if breaker_open:
        taints.append({"key": TAINT_UNAVAILABLE, "value": "true", "effect": "NoSchedule"})
    if cfg is not None:
        taints += [t.to_json() for t in cfg.taints]
    return taints


def config_taint_note(cfg: NodeConfig) -> str | None:
    """The ``CONFIG_TAINTS_ANNOTATION`` value: the configured taint keys (None: no such taint)."""
    return ",".join(sorted({t.key for t in cfg.taints})) or None


def owned_keys(cfg: NodeConfig, annotations: Mapping[str, str]) -> frozenset[str]:
    """The taint keys this agent may add or remove on the node: its own, the configured ones,
    and those it noted having set from config before (so a taint removed from config goes)."""
    noted = (annotations.get(CONFIG_TAINTS_ANNOTATION) or "").split(",")
    return OWNED_TAINT_KEYS | {t.key for t in cfg.taints} | {k for k in noted if k}


def merge_taints(
    current: Sequence[JSON], desired: Sequence[JSON], owned: frozenset[str] = OWNED_TAINT_KEYS
) -> list[JSON]:
    """``current`` with only our taints (keys in ``owned``) changed: foreign taints untouched,
    order kept (so an unchanged node compares equal and costs no write), an unchanged taint of
    ours keeps its ``timeAdded``, new ones go last. Matched by (key, effect), the API's
    uniqueness rule."""
    wanted = {(t["key"], t["effect"]): t for t in desired}
    merged: list[JSON] = []
    for taint in current:
        if taint.get("key") not in owned:
            merged.append(dict(taint))
            continue
        want = wanted.pop((taint.get("key"), taint.get("effect")), None)
        if want is not None:  # else: ours and no longer wanted (or a duplicate): drop it
            same = taint.get("value", "") == want.get("value", "")
            merged.append(dict(taint) if same else dict(want))
    merged.extend(dict(t) for t in wanted.values())
    return merged


def capacity(cfg: NodeConfig, gpus: int) -> dict[str, str]:
    return {"cpu": cfg.cpu, "memory": cfg.memory, "pods": str(cfg.max_pods), GPU_RESOURCE: str(max(gpus, 0))}


def static_status(cfg: NodeConfig) -> JSON:
    """The parts of status that only change with config."""
    return {
        "addresses": [
            {"type": "InternalIP", "address": cfg.internal_ip},
            {"type": "Hostname", "address": cfg.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": cfg.kubelet_port}},
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "",
            "osImage": "",
            "containerRuntimeVersion": "",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_status(cfg: NodeConfig, gpus: int, conditions: Sequence[Condition] | None) -> JSON:
    """A status body for a strategic-merge patch; ``conditions=None`` leaves them alone."""
    resources = capacity(cfg, gpus)
    status: JSON = {"capacity": resources, "allocatable": dict(resources), **static_status(cfg)}
    if conditions is not None:
        status["conditions"] = [c.to_json() for c in conditions]
    return status


def build_node(cfg: NodeConfig, state: NodeState, conditions: Sequence[Condition]) -> JSON:
    """The whole Node for a create (nodes accept status on create, as the kubelet relies on)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": cfg.name,
            "labels": node_labels(cfg, sorted(state.gpu_types), state.max_gpus_per_pod),
            **({"annotations": {CONFIG_TAINTS_ANNOTATION: note}} if (note := config_taint_note(cfg)) else {}),
        },
        "spec": {"taints": owned_taints(state.breaker_open, cfg)},
        "status": node_status(cfg, state.gpus, conditions),
    }
