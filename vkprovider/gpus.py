"""GPU name normalization: one canonical id per GPU shape, whatever each provider calls it.

Clouds, ``nvidia-smi`` and GPU feature discovery name the same card differently ("NVIDIA H100
80GB HBM3", "H100 SXM", "NVIDIA-H100-80GB-HBM3", "H100_SXM"). Placement compares offers and pods
by the canonical id (``H100-SXM-80GB``), so every name is normalized at the edges: in translation
(pod side) and in each adapter (catalog side, via ``vkprovider.plugins.api.normalize_gpu``).

To add a GPU, add a row to ``GPU_TABLE``; a name is parsed into (model, form factor, memory) and
the row that fits best wins, so new spellings of known cards need no new code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class GpuShape:
    """One canonical GPU: ``model`` is the family key the name parser yields."""

    canonical: str
    model: str
    memory_gb: float
    form: str = ""
    #: Chosen when a name leaves the form factor or memory open (e.g. plain "H100").
    default: bool = False


GPU_TABLE: tuple[GpuShape, ...] = (
    GpuShape("B200-SXM-192GB", "B200", 192, "SXM", default=True),
    GpuShape("H200-SXM-141GB", "H200", 141, "SXM", default=True),
    GpuShape("H200-NVL-141GB", "H200", 141, "NVL"),
    GpuShape("GH200-96GB", "GH200", 96, default=True),
    GpuShape("H100-SXM-80GB", "H100", 80, "SXM", default=True),
    GpuShape("H100-PCIE-80GB", "H100", 80, "PCIE"),
    GpuShape("H100-NVL-94GB", "H100", 94, "NVL"),
    GpuShape("A100-SXM-80GB", "A100", 80, "SXM", default=True),
    GpuShape("A100-SXM-40GB", "A100", 40, "SXM"),
    GpuShape("A100-PCIE-80GB", "A100", 80, "PCIE"),
    GpuShape("A100-PCIE-40GB", "A100", 40, "PCIE"),
    GpuShape("L40S-48GB", "L40S", 48, default=True),
    GpuShape("L40-48GB", "L40", 48, default=True),
    GpuShape("L4-24GB", "L4", 24, default=True),
    GpuShape("A40-48GB", "A40", 48, default=True),
    GpuShape("A10G-24GB", "A10G", 24, default=True),
    GpuShape("A10-24GB", "A10", 24, default=True),
    GpuShape("T4-16GB", "T4", 16, default=True),
    GpuShape("V100-SXM-32GB", "V100", 32, "SXM"),
    GpuShape("V100-SXM-16GB", "V100", 16, "SXM", default=True),
    GpuShape("V100-PCIE-32GB", "V100", 32, "PCIE"),
    GpuShape("V100-PCIE-16GB", "V100", 16, "PCIE"),
    GpuShape("RTX-5090-32GB", "RTX-5090", 32, default=True),
    GpuShape("RTX-4090-24GB", "RTX-4090", 24, default=True),
    GpuShape("RTX-4080-16GB", "RTX-4080", 16, default=True),
    GpuShape("RTX-3090-24GB", "RTX-3090", 24, default=True),
    GpuShape("RTX-6000-ADA-48GB", "RTX-6000-ADA", 48, default=True),
    GpuShape("RTX-A6000-48GB", "RTX-A6000", 48, default=True),
    GpuShape("RTX-A5000-24GB", "RTX-A5000", 24, default=True),
    GpuShape("RTX-A4000-16GB", "RTX-A4000", 16, default=True),
    GpuShape("MI300X-192GB", "MI300X", 192, default=True),
)

#: (pattern over the cleaned, space-separated upper-case name, model key); first match wins,
#: so longer/more specific names come first.
_MODEL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), model)
    for pattern, model in (
        (r"\bGH200\b", "GH200"),
        (r"\bB200\b", "B200"),
        (r"\bH200\b", "H200"),
        (r"\bH100\b", "H100"),
        (r"\bA100\b", "A100"),
        (r"\bL40S\b", "L40S"),
        (r"\bL40\b", "L40"),
        (r"\bL4\b", "L4"),
        (r"\bA40\b", "A40"),
        (r"\bA10G\b", "A10G"),
        (r"\bA10\b", "A10"),
        (r"\bT4\b", "T4"),
        (r"\bV100\b", "V100"),
        (r"\b(RTX )?6000 ADA\b", "RTX-6000-ADA"),
        (r"\b(RTX )?A6000\b", "RTX-A6000"),
        (r"\b(RTX )?A5000\b", "RTX-A5000"),
        (r"\b(RTX )?A4000\b", "RTX-A4000"),
        (r"\b(RTX )?5090\b", "RTX-5090"),
        (r"\b(RTX )?4090\b", "RTX-4090"),
        (r"\b(RTX )?4080\b", "RTX-4080"),
        (r"\b(RTX )?3090\b", "RTX-3090"),
        (r"\bMI300X\b", "MI300X"),
    )
)

_FORMS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bSXM\d?\b"), "SXM"),
    (re.compile(r"\bPCI ?E\b"), "PCIE"),
    (re.compile(r"\bNVL\b"), "NVL"),
)
_MEMORY = re.compile(r"\b(\d+(?:\.\d+)?) ?GB?\b")
_BY_CANONICAL = {shape.canonical: shape for shape in GPU_TABLE}


def _clean(name: str) -> str:
    """Upper-case, separators to single spaces, and split glued forms ("H100SXM5")."""
    text = re.sub(r"[^A-Z0-9.]+", " ", name.upper())
    text = re.sub(r"(\d)(SXM|PCIE|NVL)", r"\1 \2", text)
    text = re.sub(r"(SXM\d?|PCIE)(\d+ ?GB?)\b", r"\1 \2", text)
    return " ".join(text.split())


def _fallback(cleaned: str) -> str:
    return cleaned.replace(" ", "-")


@lru_cache(maxsize=1024)
def normalize_gpu(name: str) -> str:
    """Map any provider's GPU name to its canonical id; unknown names come back cleaned
    (upper-case, dash-separated) so that equal spellings still compare equal."""
    cleaned = _clean(name)
    if not cleaned:
        return ""
    dashed = _fallback(cleaned)
    if dashed in _BY_CANONICAL:
        return dashed
    model = next((m for pattern, m in _MODEL_PATTERNS if pattern.search(cleaned)), None)
    if model is None:
        return dashed
    form = next((f for pattern, f in _FORMS if pattern.search(cleaned)), "")
    memory_match = _MEMORY.search(cleaned)
    memory = float(memory_match.group(1)) if memory_match else None
    candidates = [s for s in GPU_TABLE if s.model == model]
    if form:
        candidates = [s for s in candidates if s.form == form] or candidates
    if memory is not None:
        candidates = [s for s in candidates if s.memory_gb == memory] or candidates
    defaults = [s for s in candidates if s.default]
    return (defaults or candidates)[0].canonical


def gpu_memory_gb(canonical: str) -> float:
    """Memory per GPU in GB for a canonical id (or any name); 0.0 when unknown."""
    shape = _BY_CANONICAL.get(canonical) or _BY_CANONICAL.get(normalize_gpu(canonical))
    return float(shape.memory_gb) if shape else 0.0


def known_gpus() -> list[str]:
    """Every canonical id, for docs, validation and error messages."""
    return [shape.canonical for shape in GPU_TABLE]
