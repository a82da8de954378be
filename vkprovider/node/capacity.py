"""What the node can hold, read from the Placer's cached catalogs, health and placements.

No I/O: this runs on every probe tick to notice changes, and the catalogs are kept fresh by the
Placer itself. The scheduler computes a node's free room as ``allocatable - requests of the pods
bound to it``, so the node must advertise what it can *hold*, not what is left (DESIGN §4.1):

    nvidia.com/gpu = free GPUs at usable providers + GPUs this node's placed pods hold

capped by ``node.max_gpus``. *Free* is the sum over offers of ``capacity * gpu_count`` (an offer
of 8 x H100 with room for 2 deployments counts 16) at providers that are reachable and not
disabled; every GPU type adds to the one extended resource, and the types are node labels.
*Held* is the ``nvidia.com/gpu`` request of every non-terminal pod the Placer has placed (so the
scheduler's own subtraction cancels out and leaves exactly the providers' free GPUs); pods still
waiting for a provider hold nothing. With the circuit breaker open it is 0 (DESIGN §5.5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vkprovider.errors import VkProviderError
from vkprovider.placement.service import Placer
from vkprovider.translate.gpuspec import gpu_count

GPU_RESOURCE = "nvidia.com/gpu"
_TERMINAL = ("Succeeded", "Failed")

#: The pods bound to this node, as the pod controller's cache has them.
PodSource = Callable[[], Iterable[dict[str, Any]]]


@dataclass(frozen=True)
class Capacity:
    gpus: int
    gpu_types: frozenset[str]
    breaker_open: bool
    free: int = 0
    held: int = 0
    max_per_pod: int | None = None  #: the largest listed offer's GPU count (None: no offers)


def purchasable_gpus(placer: Placer) -> int:
    """GPUs across the catalogs of usable (reachable, not disabled) providers."""
    total = 0
    for name, catalog in placer.catalog.providers.items():
        if placer.health.unusable_reason(name) is not None:
            continue
        total += sum(max(rec.capacity, 0) * rec.count for rec in catalog.offers)
    return total


def pod_gpus(pod: dict[str, Any]) -> int:
    """The pod's ``nvidia.com/gpu`` request as the scheduler counts it (0 if unreadable)."""
    try:
        return gpu_count(pod.get("spec") or {}, GPU_RESOURCE)
    except (VkProviderError, ValueError, TypeError):
        return 0


def held_gpus(placer: Placer, pods: PodSource | None = None) -> int:
    """GPUs this node's placed pods hold. With ``pods`` (the service), their requests; without
    (a bare agent in tests and the simulator), the GPU count of each placement's offer."""
    if pods is None:
        total = 0
        for provider, offer_id in placer.placements().values():
            offer = placer.catalog.offer(provider, offer_id) if offer_id else None
            total += offer.gpu_count if offer is not None else 0
        return total
    return sum(
        pod_gpus(pod)
        for pod in pods()
        if (pod.get("status") or {}).get("phase") not in _TERMINAL
        and placer.placed(str((pod.get("metadata") or {}).get("uid", ""))) is not None
    )


def offered_gpu_types(placer: Placer) -> frozenset[str]:
    """Every GPU type any provider lists (capacity or not): labels should not flap with stock."""
    return frozenset(rec.gpu for catalog in placer.catalog.providers.values() for rec in catalog.offers)


def largest_offer(placer: Placer) -> int | None:
    """The most GPUs one listed offer has (capacity or not, so the label does not flap with
    stock): the most one pod can get on this node."""
    counts = [rec.count for catalog in placer.catalog.providers.values() for rec in catalog.offers]
    return max(counts) if counts else None


def current_capacity(placer: Placer, pods: PodSource | None = None, *, cap: int | None = None) -> Capacity:
    breaker = placer.health.breaker_open()
    free, held = purchasable_gpus(placer), held_gpus(placer, pods)
    gpus = 0 if breaker else free + held
    if cap is not None:
        gpus = min(gpus, cap)
    return Capacity(
        gpus=gpus,
        gpu_types=offered_gpu_types(placer),
        breaker_open=breaker,
        free=free,
        held=held,
        max_per_pod=largest_offer(placer),
    )
