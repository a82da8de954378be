"""What the node can offer, read from the Placer's cached catalogs and provider health.

No I/O: this runs on every probe tick to notice changes, and the catalogs are kept fresh by
the Placer itself. ``nvidia.com/gpu`` is the number of GPUs purchasable right now from providers
that can take pods (sum of offer capacity x GPUs per offer), so the scheduler stops sending pods
the providers could not place; with the circuit breaker open it is 0 (DESIGN §5.5).
"""

from __future__ import annotations

from dataclasses import dataclass

from vkprovider.placement.service import Placer


@dataclass(frozen=True)
class Capacity:
    gpus: int
    gpu_types: frozenset[str]
    breaker_open: bool


def purchasable_gpus(placer: Placer) -> int:
    """GPUs across the catalogs of usable (reachable, not disabled) providers."""
    total = 0
    for name, catalog in placer.catalog.providers.items():
        if placer.health.unusable_reason(name) is not None:
            continue
        total += sum(max(rec.capacity, 0) * rec.count for rec in catalog.offers)
    return total


def offered_gpu_types(placer: Placer) -> frozenset[str]:
    """Every GPU type any provider lists (capacity or not): labels should not flap with stock."""
    return frozenset(rec.gpu for catalog in placer.catalog.providers.values() for rec in catalog.offers)


def current_capacity(placer: Placer) -> Capacity:
    breaker = placer.health.breaker_open()
    gpus = 0 if breaker else purchasable_gpus(placer)
    return Capacity(gpus=gpus, gpu_types=offered_gpu_types(placer), breaker_open=breaker)
