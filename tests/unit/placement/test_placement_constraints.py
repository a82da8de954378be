from __future__ import annotations

import pytest
from placement_support import request

from vkprovider.errors import InvalidRequest
from vkprovider.placement.config import PlacementConfig
from vkprovider.placement.constraints import Constraints, Spot, effective_need, parse_constraints


def test_parse_all_annotations() -> None:
    c = parse_constraints(
        {
            "vkprovider.io/providers": "a, b",
            "vkprovider.io/providers-deny": "c",
            "vkprovider.io/regions": "us-east",
            "vkprovider.io/regions-deny": "eu-west",
            "vkprovider.io/gpu-type": "h100,A100-SXM-80GB",
            "vkprovider.io/max-price": "3.5",
            "vkprovider.io/spot": "ONLY",
            "vkprovider.io/spread-max-share": "0.5",
            "vkprovider.io/placement": "{ignored: our own output}",
            "unrelated": "x",
        }
    )
    assert c.providers == {"a", "b"}
    assert c.providers_deny == {"c"}
    assert c.regions == {"us-east"} and c.regions_deny == {"eu-west"}
    assert c.gpu_types == {"H100", "H100-SXM-80GB", "A100-SXM-80GB"}  # family + canonical id
    assert c.max_price == 3.5
    assert c.spot is Spot.ONLY
    assert c.spread_max_share == 0.5


def test_no_annotations_means_no_opinion() -> None:
    assert parse_constraints({}) == Constraints()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("vkprovider.io/max-price", "cheap"),
        ("vkprovider.io/max-price", "-1"),
        ("vkprovider.io/max-price", "nan"),
        ("vkprovider.io/max-price", "0"),
        ("vkprovider.io/spot", "maybe"),
        ("vkprovider.io/providers", ""),
        ("vkprovider.io/providers", " , "),
        ("vkprovider.io/providers", "bad name!"),
        ("vkprovider.io/regions", "us east"),
        ("vkprovider.io/gpu-type", "H100;A100"),
        ("vkprovider.io/spread-max-share", "1.5"),
        ("vkprovider.io/spread-max-share", "0"),
    ],
)
def test_invalid_values_name_the_annotation(key: str, value: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_constraints({key: value})
    assert info.value.reason == "InvalidAnnotation"
    assert key in info.value.message and repr(value) in info.value.message


def test_config_and_pod_combine_by_intersection() -> None:
    cfg = PlacementConfig(
        providers_allow=["a", "b"],
        providers_deny=["x"],
        regions_allow=["us-east", "us-west"],
        max_price_per_hour=5.0,
    )
    pod = parse_constraints(
        {
            "vkprovider.io/providers": "b,c",
            "vkprovider.io/providers-deny": "y",
            "vkprovider.io/max-price": "9",
        }
    )
    need = effective_need(request(), pod, cfg)
    assert need.providers == {"b"}
    assert need.providers_deny == {"x", "y"}
    assert need.regions == {"us-east", "us-west"}
    assert need.max_price == 5.0  # the lower of pod and config


def test_request_gpu_type_is_binding_and_annotation_can_only_narrow() -> None:
    cfg = PlacementConfig()
    need = effective_need(
        request(gpu="h100-sxm-80gb"), parse_constraints({"vkprovider.io/gpu-type": "H100"}), cfg
    )
    assert need.gpu_types == {"H100-SXM-80GB"}
    clash = effective_need(
        request(gpu="A100-40GB"), parse_constraints({"vkprovider.io/gpu-type": "H100"}), cfg
    )
    assert clash.gpu_types == frozenset()  # nothing can match: the pod gets NoCandidates, not a wrong GPU


def test_config_forbidding_spot_wins() -> None:
    need = effective_need(
        request(), parse_constraints({"vkprovider.io/spot": "only"}), PlacementConfig(allow_spot=False)
    )
    assert need.spot_forbidden_by_config and need.spot is Spot.ONLY


def test_spread_share_from_pod_overrides_config() -> None:
    cfg = PlacementConfig(spread_max_share=0.5)
    assert effective_need(request(), Constraints(), cfg).spread_max_share == 0.5
    pod = parse_constraints({"vkprovider.io/spread-max-share": "0.25"})
    assert effective_need(request(), pod, cfg).spread_max_share == 0.25
