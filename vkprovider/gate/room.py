"""Would a pod's demand fit what the virtual node has left? (the scheduler's NodeResourcesFit)

The Pending rule (``vkprovider/gate/pending.py``) untaints only for pods that the gate's taint
is what keeps out. A pod asking more than the virtual node can give (16 GPUs where it offers 8,
or more than is left after the pods already there) stays Pending with or without the taint, so
it must not switch the return off.

Demand is the fit engine's (``vkprovider.gate.podspec.pod_requests``: containers and sidecars,
the largest init container, overhead, one pod slot; a limit alone is the request), so the
Pending rule and the return wave count a pod the same way. Room is allocatable minus the demand of the
non-terminal pods bound to the node; a resource the node does not advertise is 0 of it. The
pod count is checked when the node states ``pods``, and a GPU demand against the node's
``vkprovider.io/max-gpus-per-pod`` label (the largest offer any provider lists: with 8-GPU
offers a 16-GPU pod fits no single machine, however many GPUs the node offers in total). Quantities are parsed exactly
(``vkprovider.translate.quantity``); one the API would not have stored is ignored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vkprovider.errors import InvalidRequest
from vkprovider.gate.podspec import pod_requests
from vkprovider.kube.gate_heartbeat import MAX_GPUS_PER_POD_LABEL
from vkprovider.translate.quantity import parse_quantity

_TERMINAL = ("Succeeded", "Failed")
GPU_RESOURCE = "nvidia.com/gpu"


def _quantity(value: object) -> Decimal | None:
    try:
        return parse_quantity(value)
    except InvalidRequest:
        return None


@dataclass(frozen=True)
class Room:
    """What a node has left, per resource."""

    free: Mapping[str, Decimal]
    counts_pods: bool
    max_gpus_per_pod: Decimal | None = None  #: the node's label: the most one pod can get

    @classmethod
    def of(cls, node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Room:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        free: dict[str, Decimal] = defaultdict(Decimal)
        for name, value in allocatable.items():
            free[name] = _quantity(value) or Decimal(0)
        name = node["metadata"]["name"]
        for pod in pods:
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if spec.get("nodeName") != name or status.get("phase") in _TERMINAL:
                continue
            for resource, amount in pod_requests(pod).items():
                free[resource] -= amount
        labels = node["metadata"].get("labels") or {}
        per_pod = _quantity(labels.get(MAX_GPUS_PER_POD_LABEL, ""))
        return cls(free=dict(free), counts_pods="pods" in allocatable, max_gpus_per_pod=per_pod)

    def fits(self, pod: Mapping[str, Any]) -> bool:
        for resource, amount in pod_requests(pod).items():
            if amount <= 0 or (resource == "pods" and not self.counts_pods):
                continue
            if amount > self.free.get(resource, Decimal(0)):
                return False
            if (
                resource == GPU_RESOURCE
                and self.max_gpus_per_pod is not None
                and amount > self.max_gpus_per_pod
            ):
                return False  # no single offer there is that large
        return True
