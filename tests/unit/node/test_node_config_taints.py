"""A node's configured ``taints``: written with the agent's own, and removed once they leave the
config (the agent notes which keys it set), never touching a taint someone else set."""

from __future__ import annotations

from typing import Any

from vkprovider.config import NodeConfig
from vkprovider.node.manifest import OWNED_TAINT_KEYS, NodeState, build_node
from vkprovider.node.status import NodeObject
from vkprovider.taint_config import AGENT_TAINT_KEYS, CONFIG_TAINTS_ANNOTATION

PROVIDER = {"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"}
FOREIGN = {"key": "team.example.com/hold", "value": "x", "effect": "NoSchedule"}
STATE = NodeState(ready=True, gpus=4)


def cfg(*taints: dict[str, str]) -> NodeConfig:
    return NodeConfig.model_validate({"name": "vk-pool", "taints": list(taints)})


def patch_for(config: NodeConfig, taints: list[dict[str, Any]], note: str | None) -> dict[str, Any] | None:
    node = build_node(config, STATE, [])
    node["metadata"].update(resourceVersion="7", annotations={CONFIG_TAINTS_ANNOTATION: note} if note else {})
    node["spec"]["taints"] = taints
    obj = NodeObject(None, config)  # type: ignore[arg-type]  # metadata_patch never calls the API
    obj.node = node
    return obj.metadata_patch(STATE)


def test_config_refuses_exactly_the_agents_own_keys() -> None:
    assert frozenset(AGENT_TAINT_KEYS) == OWNED_TAINT_KEYS


def test_a_new_node_carries_its_configured_taints_and_notes_their_keys() -> None:
    spot = {"key": "pool.example.com/spot", "value": "true", "effect": "PreferNoSchedule"}
    node = build_node(cfg(spot), STATE, [])
    assert node["spec"]["taints"] == [PROVIDER, spot]
    assert node["metadata"]["annotations"] == {CONFIG_TAINTS_ANNOTATION: "pool.example.com/spot"}
    assert "annotations" not in build_node(cfg(), STATE, [])["metadata"]


def test_a_taint_removed_from_config_goes_and_a_foreign_one_stays() -> None:
    old = {"key": "pool", "value": "a", "effect": "NoSchedule"}
    new = {"key": "region", "value": "eu", "effect": "NoExecute"}
    patch = patch_for(cfg(new), [PROVIDER, FOREIGN, old], "pool")
    assert patch is not None
    assert patch["spec"]["taints"] == [PROVIDER, FOREIGN, new]
    assert patch["metadata"]["annotations"] == {CONFIG_TAINTS_ANNOTATION: "region"}
    # in place: nothing to write
    assert patch_for(cfg(new), [PROVIDER, FOREIGN, new], "region") is None
    # every config taint gone: the taint and the note go, the foreign taint stays
    patch = patch_for(cfg(), [PROVIDER, FOREIGN, new], "region")
    assert patch is not None
    assert patch["spec"]["taints"] == [PROVIDER, FOREIGN]
    assert patch["metadata"]["annotations"] == {CONFIG_TAINTS_ANNOTATION: None}


def test_a_changed_value_is_rewritten_and_an_unnoted_key_is_not_ours() -> None:
    patch = patch_for(
        cfg({"key": "pool", "value": "b"}), [PROVIDER, {**FOREIGN, "key": "pool", "value": "a"}], "pool"
    )
    assert patch is not None and patch["spec"]["taints"][1] == {
        "key": "pool",
        "value": "b",
        "effect": "NoSchedule",
    }
    # a taint with a key we never noted and do not configure belongs to someone else
    assert patch_for(cfg(), [PROVIDER, {**FOREIGN, "key": "pool"}], None) is None
