"""GPU name normalization for catalog entries, via the service-wide table.

Placement compares offers and pods by canonical GPU id (``H100-SXM-80GB``). The table lives in
``vkprovider.plugins.api.normalize_gpu``; catalogs often name a card without its memory ("A100
SXM4") while reporting the memory separately, so the memory is appended when the name lacks it
— that picks the right variant (A100-SXM-40GB vs -80GB) and keeps unknown cards distinct.
"""

from __future__ import annotations

import re

from vkprovider.plugins.api import normalize_gpu as _normalize

_HAS_MEMORY = re.compile(r"\d+ ?GB", re.IGNORECASE)


def normalize_gpu(name: str, memory_gb: float = 0.0) -> str:
    """Canonical GPU id for a provider's GPU name (``memory_gb`` disambiguates variants)."""
    if memory_gb >= 1 and not _HAS_MEMORY.search(name):
        name = f"{name} {round(memory_gb)}GB"
    return _normalize(name)
