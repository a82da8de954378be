"""The quota: section's two shapes, and the errors that name the bad field."""

from __future__ import annotations

from typing import Any

import pytest

from vkprovider.config import load_settings
from vkprovider.errors import ConfigError
from vkprovider.quota.config import QuotaConfig


def flavor(name: str = "a100", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "node_selector": {"gpu": name},
        "queues": [{"name": "training", "share": 3}, {"name": "research"}],
        **extra,
    }


def test_the_short_form_is_one_flavor_with_one_queue() -> None:
    (target,) = QuotaConfig(cluster_queue="training").targets()
    assert target.flavor.name == "local-gpu"
    assert target.flavor.node_selector == {"pool": "local-gpu"}
    assert [(q.name, q.share) for q in target.flavor.queues] == [("training", 1)]
    assert target.queue_field(0) == "quota.cluster_queue" and target.name_field == "quota.flavor"


def test_the_full_form_lists_flavors_and_their_queues_once_each() -> None:
    config = QuotaConfig.model_validate(
        {"flavors": [flavor(), flavor("h100", queues=[{"name": "inference-batch"}, {"name": "training"}])]}
    )
    assert [t.flavor.name for t in config.targets()] == ["a100", "h100"]
    assert config.queue_names() == ["training", "research", "inference-batch"]
    assert config.targets()[1].queue_field(1) == "quota.flavors.1.queues.1.name"
    assert config.lease_suffix() == "training"


def errors(tmp_path: Any, quota: dict[str, Any]) -> str:
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"quota": quota}))
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    return str(caught.value)


@pytest.mark.parametrize(
    ("quota", "needle"),
    [
        ({}, "quota.cluster_queue: Field required (or list flavors: with their queues)"),
        (
            {"cluster_queue": "training", "flavors": [flavor()]},
            "quota.cluster_queue: set either the short form",
        ),
        ({"flavors": [flavor(), flavor()]}, "quota.flavors.1.name: flavor 'a100' is listed twice"),
        (
            {"flavors": [flavor(queues=[{"name": "a"}, {"name": "a"}])]},
            "quota.flavors.0.queues.1.name: ClusterQueue 'a' is listed twice",
        ),
        (
            {"flavors": [flavor(queues=[{"name": "a", "share": 0}])]},
            "quota.flavors.0.queues: every share is 0",
        ),
        ({"flavors": [flavor(queues=[{"name": "a", "share": -1}])]}, "quota.flavors.0.queues.0.share"),
        ({"flavors": [flavor(node_selector={})]}, "quota.flavors.0.node_selector"),
        ({"flavors": [flavor(queues=[])]}, "quota.flavors.0.queues"),
        (
            {"flavors": [flavor(reserve={"nvidia.com/gpu": "-2"})]},
            "quota.flavors.0.reserve.nvidia.com/gpu: must not be negative",
        ),
        (
            {"flavors": [flavor(reserve={"nvidia.com/gpus": "2"})]},
            "quota.flavors.0.reserve.nvidia.com/gpus: not a synced resource",
        ),
        (
            {"cluster_queue": "t", "reserve": {"cpu": "lots"}},
            "quota.reserve.cpu: cpu: invalid quantity 'lots'",
        ),
        (
            {"flavors": [flavor(tolerations=[{"key": "x", "effect": "NoExcute"}])]},
            "quota.flavors.0.tolerations.0.effect",
        ),
        ({"cluster_queue": "t", "resources": ["cpu", "cpu"]}, "quota.resources: a resource is listed twice"),
    ],
)
def test_bad_quota_config_names_the_field(tmp_path: Any, quota: dict[str, Any], needle: str) -> None:
    assert needle in errors(tmp_path, quota)
