from __future__ import annotations

from placement_support import offer, request

from vkprovider.placement import filters as f
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.constraints import Need, effective_need, parse_constraints


def need(
    annotations: dict[str, str] | None = None, cfg: PlacementConfig | None = None, **req: object
) -> Need:
    return effective_need(request(**req), parse_constraints(annotations or {}), cfg or PlacementConfig())  # type: ignore[arg-type]


def test_provider_allow_and_deny() -> None:
    n = need({"vkprovider.io/providers": "a,b", "vkprovider.io/providers-deny": "b"})
    assert f.provider_reason("a", n) is None
    assert "not in allowed" in (f.provider_reason("c", n) or "")
    assert "denied" in (f.provider_reason("b", n) or "")
    assert f.provider_reason("anything", need()) is None


def test_gpu_type_exact_and_family() -> None:
    n = need({"vkprovider.io/gpu-type": "H100"})
    assert f.gpu_type_reason(offer("a", "1", 1, gpu="H100-SXM-80GB"), n) is None
    assert f.gpu_type_reason(offer("a", "1", 1, gpu="h100"), n) is None
    assert f.gpu_type_reason(offer("a", "1", 1, gpu="H1000-X"), n) is not None  # family needs the dash
    assert "A100-40GB" in (f.gpu_type_reason(offer("a", "1", 1, gpu="A100-40GB"), n) or "")
    assert f.gpu_type_reason(offer("a", "1", 1, gpu="anything"), need()) is None
    odd = need({"vkprovider.io/gpu-type": "nvidia-h100-80gb-hbm3"})  # any spelling reaches the canonical id
    assert f.gpu_type_reason(offer("a", "1", 1, gpu="H100-SXM-80GB"), odd) is None
    assert f.gpu_type_reason(offer("a", "1", 1, gpu="H100-PCIE-80GB"), odd) is not None


def test_gpu_count_fit_is_at_least_requested() -> None:
    n = need(count=2)
    assert f.gpu_count_reason(offer("a", "1", 1, count=2), n) is None
    assert f.gpu_count_reason(offer("a", "1", 1, count=8), n) is None
    assert f.gpu_count_reason(offer("a", "1", 1, count=1), n) == "1 GPUs < 2 requested"


def test_gpu_memory_stated_or_read_from_the_type_name() -> None:
    n = need(memory=40.0)
    assert f.gpu_memory_reason(offer("a", "1", 1, gpu="X", memory=48), n) is None
    assert f.gpu_memory_reason(offer("a", "1", 1, gpu="X", memory=24), n) is not None
    assert f.gpu_memory_reason(offer("a", "1", 1, gpu="A100-SXM-80GB"), n) is None
    assert (
        f.gpu_memory_reason(offer("a", "1", 1, gpu="A10G"), n) is not None
    )  # unknown memory, 10G is no size
    assert f.gpu_memory_reason(offer("a", "1", 1, gpu="A10G"), need()) is None  # no memory asked


def test_region_allow_and_deny() -> None:
    n = need({"vkprovider.io/regions": "us-east,eu-west", "vkprovider.io/regions-deny": "eu-west"})
    assert f.region_reason(offer("a", "1", 1, region="us-east"), n) is None
    assert "not in" in (f.region_reason(offer("a", "1", 1, region="ap-south"), n) or "")
    assert "denied" in (f.region_reason(offer("a", "1", 1, region="eu-west"), n) or "")


def test_max_price_is_inclusive() -> None:
    n = need({"vkprovider.io/max-price": "2.5"})
    assert f.max_price_reason(offer("a", "1", 2.5), n) is None
    assert f.max_price_reason(offer("a", "1", 2.51), n) == "price 2.51/h > max 2.5/h"


def test_spot_policies() -> None:
    spot, od = offer("a", "1", 1, spot=True), offer("a", "2", 1, spot=False)
    allow, never, only = need(), need({"vkprovider.io/spot": "false"}), need({"vkprovider.io/spot": "only"})
    assert f.spot_reason(spot, allow) is None and f.spot_reason(od, allow) is None
    assert f.spot_reason(spot, never) is not None and f.spot_reason(od, never) is None
    assert f.spot_reason(spot, only) is None and f.spot_reason(od, only) is not None
    cfg_off = need({"vkprovider.io/spot": "only"}, PlacementConfig(allow_spot=False))
    assert f.spot_reason(spot, cfg_off) == "spot disabled by config"
    assert f.spot_reason(od, cfg_off) is not None  # spot only + no spot allowed: nothing fits


def test_dynamic_filters() -> None:
    assert f.capacity_reason(0) is not None and f.capacity_reason(1) is None
    assert f.blocklist_reason(True) is not None and f.blocklist_reason(False) is None
    assert f.budget_reason(3.0, 2.0) is not None and f.budget_reason(2.0, 2.0) is None
    assert f.spread_reason(False, 0.5) is not None and f.spread_reason(True, 0.5) is None


def test_offer_rejection_reports_the_first_failing_filter() -> None:
    n = need({"vkprovider.io/providers": "a"}, count=4)
    assert f.offer_rejection(offer("b", "1", 1, count=1), n) == ("provider", "provider b not in allowed [a]")
    assert f.offer_rejection(offer("a", "1", 1, count=1), n) == ("gpu-count", "1 GPUs < 4 requested")
    assert f.offer_rejection(offer("a", "1", 1, count=4), n) is None
