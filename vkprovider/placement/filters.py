"""Hard filters: each says in a few words why an offer cannot take the pod, or ``None``.

These functions are the reference semantics. The ranker in :mod:`vkprovider.placement.rank`
applies the same rules through precomputed indexes (whole providers and GPU-type buckets are
rejected at once); a test checks both agree offer by offer.

GPU fit: an offer carries ``gpu_count`` GPUs per deployment and its price is for all of them,
so an offer fits when ``offer.gpu_count >= request.gpu_count``. Bigger offers are allowed but
cost more, so price already prefers the exact size; among equal scores the smaller excess wins.
Memory is per GPU; an offer that does not state it gets the memory of its canonical GPU type
(``vkprovider.gpus``), and unknown memory fails a non-zero memory request.
"""

from __future__ import annotations

from collections.abc import Callable

from vkprovider.gpus import gpu_memory_gb
from vkprovider.models import Offer
from vkprovider.placement.constraints import Need, Spot, gpu_matches, normalize_gpu

# Stable short codes, used as keys of the rejection counts in decisions and annotations.
PROVIDER = "provider"
DISABLED = "disabled"
UNHEALTHY = "unhealthy"
GPU_TYPE = "gpu-type"
GPU_COUNT = "gpu-count"
GPU_MEMORY = "gpu-memory"
REGION = "region"
MAX_PRICE = "max-price"
SPOT = "spot"
CAPACITY = "capacity"
BLOCKLISTED = "blocklisted"
BUDGET = "budget"
SPREAD = "spread"

OfferFilter = Callable[[Offer, Need], "str | None"]


def gpu_memory_of(offer: Offer) -> float:
    return offer.gpu_memory_gb or gpu_memory_gb(offer.gpu_type)


def _fmt(values: frozenset[str]) -> str:
    return ",".join(sorted(values)) or "(none)"


def provider_reason(name: str, need: Need) -> str | None:
    if need.providers is not None and name not in need.providers:
        return f"provider {name} not in allowed [{_fmt(need.providers)}]"
    if name in need.providers_deny:
        return f"provider {name} denied"
    return None


def gpu_type_reason(offer: Offer, need: Need) -> str | None:
    if need.gpu_types is not None and not gpu_matches(normalize_gpu(offer.gpu_type), need.gpu_types):
        return f"gpu {offer.gpu_type} not in [{_fmt(need.gpu_types)}]"
    return None


def gpu_count_reason(offer: Offer, need: Need) -> str | None:
    if offer.gpu_count < need.gpu_count:
        return f"{offer.gpu_count} GPUs < {need.gpu_count} requested"
    return None


def gpu_memory_reason(offer: Offer, need: Need) -> str | None:
    memory = gpu_memory_of(offer)
    if need.gpu_memory_gb > 0 and memory < need.gpu_memory_gb:
        return f"{memory:g} GB per GPU < {need.gpu_memory_gb:g} GB requested"
    return None


def region_reason(offer: Offer, need: Need) -> str | None:
    if need.regions is not None and offer.region not in need.regions:
        return f"region {offer.region or '(none)'} not in [{_fmt(need.regions)}]"
    if offer.region in need.regions_deny:
        return f"region {offer.region} denied"
    return None


def max_price_reason(offer: Offer, need: Need) -> str | None:
    if need.max_price is not None and offer.price_per_hour > need.max_price:
        return f"price {offer.price_per_hour:g}/h > max {need.max_price:g}/h"
    return None


def spot_reason(offer: Offer, need: Need) -> str | None:
    if offer.spot and need.spot_forbidden_by_config:
        return "spot disabled by config"
    if offer.spot and need.spot is Spot.NEVER:
        return "spot not allowed"
    if not offer.spot and need.spot is Spot.ONLY:
        return "on-demand, spot only requested"
    return None


#: The per-offer filters in the order the ranker applies them, with their codes.
OFFER_FILTERS: tuple[tuple[str, OfferFilter], ...] = (
    (GPU_TYPE, gpu_type_reason),
    (MAX_PRICE, max_price_reason),
    (GPU_COUNT, gpu_count_reason),
    (GPU_MEMORY, gpu_memory_reason),
    (REGION, region_reason),
    (SPOT, spot_reason),
)


def capacity_reason(capacity: int) -> str | None:
    return "no capacity left" if capacity <= 0 else None


def blocklist_reason(blocked: bool) -> str | None:
    return "blocklisted after NoCapacity" if blocked else None


def budget_reason(cost: float, remaining: float) -> str | None:
    if cost > remaining + 1e-9:
        return f"{cost:g}/h exceeds the namespace's remaining budget {max(remaining, 0.0):g}/h"
    return None


def spread_reason(allowed: bool, share: float) -> str | None:
    return None if allowed else f"workload already has its max share {share:g} here"


def offer_rejection(offer: Offer, need: Need) -> tuple[str, str] | None:
    """``(code, reason)`` of the first static filter ``offer`` fails, else ``None``."""
    reason = provider_reason(offer.provider, need)
    if reason is not None:
        return (PROVIDER, reason)
    for code, check in OFFER_FILTERS:
        reason = check(offer, need)
        if reason is not None:
            return (code, reason)
    return None
