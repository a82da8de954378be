"""GPU names as cloud catalogs write them, normalized to the service-wide canonical id.

Placement compares offers and pods by canonical GPU id (``H100-SXM-80GB``), from the table behind
:func:`vkprovider.gpus.normalize_gpu`. Catalogs often name a card without its memory ("A100
SXM4") while reporting the memory separately, so :func:`normalize_catalog_gpu` appends the memory
when the name lacks it: that picks the right variant (A100-SXM-40GB vs -80GB) and keeps unknown
cards of different sizes distinct.
"""

from __future__ import annotations

import re

from vkprovider.gpus import normalize_gpu

__all__ = ["normalize_catalog_gpu"]

_HAS_MEMORY = re.compile(r"\d+ ?GB", re.IGNORECASE)


def normalize_catalog_gpu(name: str, memory_gb: float = 0.0) -> str:
    """Canonical GPU id for a catalog's GPU name; ``memory_gb`` (per GPU) disambiguates variants."""
    if memory_gb >= 1 and not _HAS_MEMORY.search(name):
        name = f"{name} {round(memory_gb)}GB"
    return normalize_gpu(name)
