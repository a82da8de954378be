"""Pod-level placement controls (annotations under ``vkprovider.io/``) and how they combine.

Annotations (all optional; lists are comma-separated, whitespace ignored):

==================================  ==========================================================
``vkprovider.io/providers``         allow list of provider instance names
``vkprovider.io/providers-deny``    deny list of provider instance names
``vkprovider.io/regions``           allow list of regions
``vkprovider.io/regions-deny``      deny list of regions
``vkprovider.io/gpu-type``          acceptable GPU types; ``H100`` also matches ``H100-SXM-80GB``
``vkprovider.io/max-price``         max price per hour of the whole offer (a positive number)
``vkprovider.io/spot``              ``true`` (spot or on-demand), ``false`` (on-demand only),
                                    ``only`` (spot only)
``vkprovider.io/spread-max-share``  max share (0 < x <= 1) of the workload's replicas per provider
==================================  ==========================================================

Config and pod combine by intersection: both allow lists must admit a value, either deny list
excludes it, the lower max price wins, and config ``allow_spot: false`` forbids spot whatever the
pod says. An invalid value raises ``InvalidRequest(reason="InvalidAnnotation")`` naming the key.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from vkprovider.errors import InvalidRequest
from vkprovider.gpus import normalize_gpu as _canonical_gpu
from vkprovider.models import DeploymentRequest
from vkprovider.placement.config import PlacementConfig

PREFIX = "vkprovider.io/"
ANN_PROVIDERS = PREFIX + "providers"
ANN_PROVIDERS_DENY = PREFIX + "providers-deny"
ANN_REGIONS = PREFIX + "regions"
ANN_REGIONS_DENY = PREFIX + "regions-deny"
ANN_GPU_TYPE = PREFIX + "gpu-type"
ANN_MAX_PRICE = PREFIX + "max-price"
ANN_SPOT = PREFIX + "spot"
ANN_SPREAD = PREFIX + "spread-max-share"

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class Spot(enum.Enum):
    ALLOW = "true"
    NEVER = "false"
    ONLY = "only"


@dataclass(frozen=True, slots=True)
class Constraints:
    """What a pod's annotations ask for; ``None`` means "no opinion"."""

    providers: frozenset[str] | None = None
    providers_deny: frozenset[str] = frozenset()
    regions: frozenset[str] | None = None
    regions_deny: frozenset[str] = frozenset()
    gpu_types: frozenset[str] | None = None
    max_price: float | None = None
    spot: Spot = Spot.ALLOW
    spread_max_share: float | None = None


@dataclass(frozen=True, slots=True)
class Need:
    """The effective constraints of one decision: request ∩ pod annotations ∩ config."""

    gpu_count: int
    gpu_memory_gb: float
    gpu_types: frozenset[str] | None  # normalized (upper case); None = any
    providers: frozenset[str] | None
    providers_deny: frozenset[str]
    regions: frozenset[str] | None
    regions_deny: frozenset[str]
    max_price: float | None
    spot: Spot
    spot_forbidden_by_config: bool
    spread_max_share: float | None


def normalize_gpu(value: str) -> str:
    """The shared canonical GPU id (``h100 sxm`` -> ``H100-SXM-80GB``), as adapters and
    translation use it."""
    return _canonical_gpu(value)


def gpu_matches(offer_type: str, wanted: frozenset[str]) -> bool:
    """``wanted`` holds normalized names; a bare family (``H100``) matches its variants."""
    return offer_type in wanted or any(offer_type.startswith(w + "-") for w in wanted)


def _fail(key: str, value: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"annotation {key}={value!r}: {why}", reason="InvalidAnnotation")


def _names(annotations: Mapping[str, str], key: str) -> frozenset[str] | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    items = [part.strip() for part in raw.split(",")]
    if not any(items):
        raise _fail(key, raw, "expected a comma-separated list of names")
    for item in items:
        if not _NAME.match(item):
            raise _fail(key, raw, f"{item!r} is not a valid name")
    return frozenset(items)


def _number(annotations: Mapping[str, str], key: str, *, upper: float | None = None) -> float | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        raise _fail(key, raw, "expected a number") from None
    if not math.isfinite(value) or value <= 0 or (upper is not None and value > upper):
        bound = f"in (0, {upper:g}]" if upper is not None else "> 0"
        raise _fail(key, raw, f"expected a number {bound}")
    return value


def _gpu_wanted(tokens: frozenset[str]) -> frozenset[str]:
    # "H100" must keep meaning the whole family (matched by prefix), while odd spellings
    # ("nvidia-h100-80gb-hbm3") still reach their canonical id.
    return frozenset(t.upper() for t in tokens) | frozenset(normalize_gpu(t) for t in tokens)


def parse_constraints(annotations: Mapping[str, str]) -> Constraints:
    """Validate the pod's placement annotations; unknown ``vkprovider.io/`` keys are ignored."""
    raw_spot = annotations.get(ANN_SPOT)
    spot = Spot.ALLOW
    if raw_spot is not None:
        try:
            spot = Spot(raw_spot.strip().lower())
        except ValueError:
            raise _fail(ANN_SPOT, raw_spot, "expected one of true, false, only") from None
    gpu = _names(annotations, ANN_GPU_TYPE)
    return Constraints(
        providers=_names(annotations, ANN_PROVIDERS),
        providers_deny=_names(annotations, ANN_PROVIDERS_DENY) or frozenset(),
        regions=_names(annotations, ANN_REGIONS),
        regions_deny=_names(annotations, ANN_REGIONS_DENY) or frozenset(),
        gpu_types=_gpu_wanted(gpu) if gpu is not None else None,
        max_price=_number(annotations, ANN_MAX_PRICE),
        spot=spot,
        spread_max_share=_number(annotations, ANN_SPREAD, upper=1.0),
    )


def _both(a: frozenset[str] | None, b: list[str]) -> frozenset[str] | None:
    if not b:
        return a
    return frozenset(b) if a is None else a & frozenset(b)


def effective_need(request: DeploymentRequest, pod: Constraints, config: PlacementConfig) -> Need:
    """Combine the translated request, the pod's annotations and the operator config."""
    gpu_types = pod.gpu_types
    if request.gpu_type:
        req = normalize_gpu(request.gpu_type)
        # The resource/selector in the spec is binding; the annotation can only narrow it.
        gpu_types = frozenset({req}) if gpu_types is None or gpu_matches(req, gpu_types) else frozenset()
    prices = [p for p in (pod.max_price, config.max_price_per_hour) if p is not None]
    spot_forbidden = not config.allow_spot
    return Need(
        gpu_count=request.gpu_count,
        gpu_memory_gb=request.gpu_memory_gb,
        gpu_types=gpu_types,
        providers=_both(pod.providers, config.providers_allow),
        providers_deny=pod.providers_deny | frozenset(config.providers_deny),
        regions=_both(pod.regions, config.regions_allow),
        regions_deny=pod.regions_deny | frozenset(config.regions_deny),
        max_price=min(prices) if prices else None,
        spot=pod.spot,
        spot_forbidden_by_config=spot_forbidden,
        spread_max_share=pod.spread_max_share or config.spread_max_share,
    )
