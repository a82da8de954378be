"""Choosing an offer for a request the placement left open: the cheapest that fits.

The placement normally names the offer (``DeploymentRequest.offer_id``); a request without one
(deployed directly, or after a catalog change) still has to land somewhere, and every adapter
answered it with the same filter: capacity left, the GPU count, the GPU type by canonical id and
the region if the pod asks for one; cheapest first, ties broken by offer id so the choice is
stable.
"""

from __future__ import annotations

from collections.abc import Iterable

from vkprovider.gpus import normalize_gpu
from vkprovider.models import DeploymentRequest, Offer

__all__ = ["cheapest_offer", "same_gpu"]


def same_gpu(offered: str, wanted: str) -> bool:
    """Whether an offer's GPU type is the one a pod asks for (as written or by canonical id)."""
    return offered.upper() == wanted.upper() or offered.upper() == normalize_gpu(wanted).upper()


def cheapest_offer(offers: Iterable[Offer], request: DeploymentRequest) -> Offer | None:
    """The cheapest offer with capacity that matches the request's GPUs and region, or ``None``."""
    candidates = [
        offer
        for offer in offers
        if offer.capacity > 0
        and offer.gpu_count == request.gpu_count
        and (request.gpu_type is None or same_gpu(offer.gpu_type, request.gpu_type))
        and (not request.region or offer.region == request.region)
    ]
    return min(candidates, key=lambda o: (o.price_per_hour, o.offer_id), default=None)
