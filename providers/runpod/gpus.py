"""GPU name normalization: the shared table when it exists, a small local fallback until then.

Placement compares GPU types across providers, so every offer must carry the normalized name
(e.g. ``H100-SXM-80GB``). The service-wide table is ``vkprovider.plugins.api.normalize_gpu``;
this module defers to it when present and otherwise applies a tiny table of the names this
provider's catalog uses, so the adapter works whichever lands first.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import vkprovider.plugins.api as _api

_SHARED: Callable[[str], str] | None = getattr(_api, "normalize_gpu", None)

#: Provider spellings → normalized names, for the common inference/training parts.
_LOCAL = {
    "NVIDIA H100 80GB HBM3": "H100-SXM-80GB",
    "H100 SXM": "H100-SXM-80GB",
    "NVIDIA H100 PCIE": "H100-PCIE-80GB",
    "H100 PCIE": "H100-PCIE-80GB",
    "NVIDIA H100 NVL": "H100-NVL-94GB",
    "H100 NVL": "H100-NVL-94GB",
    "NVIDIA H200": "H200-SXM-141GB",
    "H200": "H200-SXM-141GB",
    "NVIDIA A100-SXM4-80GB": "A100-SXM-80GB",
    "A100 SXM4": "A100-SXM-80GB",
    "NVIDIA A100 80GB PCIE": "A100-PCIE-80GB",
    "A100 PCIE": "A100-PCIE-80GB",
    "NVIDIA L40S": "L40S-48GB",
    "L40S": "L40S-48GB",
    "NVIDIA L4": "L4-24GB",
    "L4": "L4-24GB",
    "NVIDIA RTX A6000": "RTX-A6000-48GB",
    "RTX A6000": "RTX-A6000-48GB",
    "NVIDIA GEFORCE RTX 4090": "RTX-4090-24GB",
    "RTX 4090": "RTX-4090-24GB",
    "NVIDIA GEFORCE RTX 5090": "RTX-5090-32GB",
    "RTX 5090": "RTX-5090-32GB",
}
_LOCAL_UPPER = {key.upper(): value for key, value in _LOCAL.items()}
_VENDOR = re.compile(r"^(NVIDIA|AMD)\s+(GEFORCE\s+)?", re.IGNORECASE)


def normalize_gpu(name: str, memory_gb: float = 0.0) -> str:
    """Normalized GPU type for a provider's GPU name (``memory_gb`` completes unknown names)."""
    if _SHARED is not None:
        return _SHARED(name)
    known = _LOCAL_UPPER.get(name.strip().upper())
    if known is not None:
        return known
    base = re.sub(r"[\s_]+", "-", _VENDOR.sub("", name.strip())).upper()
    if memory_gb and not re.search(r"\d+GB", base):
        base = f"{base}-{round(memory_gb)}GB"
    return base
