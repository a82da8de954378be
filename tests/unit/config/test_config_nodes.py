"""``nodes:``: several virtual nodes from one deployment, and ``node:`` as the one-node form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vkprovider.config import load_settings
from vkprovider.errors import ConfigError

PROVIDERS = [{"name": "east", "adapter": "x"}, {"name": "west", "adapter": "x"}]


def load(tmp_path: Path, **data: Any) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"providers": PROVIDERS, **data}))
    return load_settings(path)


def problems(tmp_path: Path, **data: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, **data)
    return [line.strip() for line in str(caught.value).splitlines()[1:]]


def test_nodes_list_gives_each_node_its_own_section(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        nodes=[
            {"name": "vk-east", "labels": {"region": "east"}, "providers": ["east"], "cpu": "8"},
            {"name": "vk-west", "providers": ["west"]},
            {"name": "vk-all"},
        ],
    )
    nodes = settings.node_list()
    assert [n.name for n in nodes] == ["vk-east", "vk-west", "vk-all"]
    assert nodes[0].labels == {"region": "east"} and nodes[0].cpu == "8" and nodes[1].cpu == "10000"
    assert [n.providers for n in nodes] == [["east"], ["west"], []]
    assert settings.node.name == "vk-east"  # one-node readers (status, explain) see the first
    assert type(settings).model_validate(settings.model_dump()) == settings  # a dump reloads


def test_single_node_section_is_a_one_element_list(tmp_path: Path) -> None:
    settings = load(tmp_path, node={"name": "vk-one", "providers": ["west"]})
    assert [(n.name, n.providers) for n in settings.node_list()] == [("vk-one", ["west"])]
    assert load(tmp_path).node_list()[0].name == "vk-external"  # neither: the default node


def test_node_and_nodes_at_once_is_refused_naming_the_field(tmp_path: Path) -> None:
    found = problems(tmp_path, node={"name": "vk-one"}, nodes=[{"name": "vk-a"}])
    assert len(found) == 1 and found[0].startswith("nodes: give either node:")


def test_a_provider_subset_naming_an_unknown_provider_is_refused(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        nodes=[{"name": "vk-a", "providers": ["east"]}, {"name": "vk-b", "providers": ["west", "north"]}],
    )
    assert len(found) == 1
    assert found[0].startswith("nodes.1.providers.1: no configured provider is named 'north'")
    found = problems(tmp_path, node={"name": "vk-a", "providers": ["nrth"]})
    assert len(found) == 1 and found[0].startswith("node.providers.0: no configured provider is named 'nrth'")


def test_duplicate_node_names_are_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, nodes=[{"name": "vk-a"}, {"name": "vk-a"}])
    assert found == ["nodes.1.name: duplicate node name 'vk-a'"]


def test_one_node_features_are_refused_with_several_nodes(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        nodes=[{"name": "vk-a"}, {"name": "vk-b"}],
        leader_election={"lease_name": "fixed"},
    )
    assert [line.split(":")[0] for line in found] == ["leader_election.lease_name"]
    assert all("serves one node only" in line for line in found)
    # one node in the list: everything works as with node:
    assert load(tmp_path, nodes=[{"name": "vk-a"}], kubelet={"csr": True}).node.name == "vk-a"


def test_each_node_needs_its_own_kubelet_port(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        nodes=[{"name": "vk-a"}, {"name": "vk-b"}, {"name": "vk-c", "kubelet_port": 10251}],
        kubelet={"csr": True},
    )
    assert found == [
        "nodes.1.kubelet_port: 127.0.0.1:10250 is also nodes.0.kubelet_port (each node's kubelet API needs its own)"
    ]
    assert load(tmp_path, nodes=[{"name": "vk-a"}, {"name": "vk-b"}]).node.name == "vk-a"  # kubelet API off


def test_each_node_has_its_own_taints(tmp_path: Path) -> None:
    pool = {"key": "pool.example.com/spot", "value": "true", "effect": "NoSchedule"}
    settings = load(
        tmp_path,
        nodes=[{"name": "vk-spot", "taints": [pool, {"key": "region"}]}, {"name": "vk-ondemand"}],
    )
    spot, ondemand = settings.node_list()
    assert [t.to_json() for t in spot.taints] == [
        pool,
        {"key": "region", "value": "", "effect": "NoSchedule"},
    ]
    assert ondemand.taints == []


def test_bad_or_foreign_node_taints_are_refused_naming_the_field(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        nodes=[
            {
                "name": "vk-a",
                "taints": [
                    {"key": "bad key!"},
                    {"key": "ok", "effect": "NoWhere"},
                    {"key": "virtual-kubelet.io/provider"},
                    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                    {"key": "ok", "value": "x" * 64},
                ],
            },
            {"name": "vk-b", "taints": [{"key": "pool"}, {"key": "pool", "value": "other"}]},
        ],
    )
    text = "\n".join(found)
    assert "nodes.0.taints.0.key" in text
    assert "nodes.0.taints.1.effect" in text
    assert "nodes.0.taints.2.key" in text and "node agent's own taint" in text
    assert "nodes.0.taints.3.key" in text and "node lifecycle" in text
    assert "nodes.0.taints.4.value" in text
    assert "nodes.1.taints.1" in text and "duplicate taint pool:NoSchedule" in text


def test_a_node_taint_with_the_gates_key_is_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, node={"name": "vk-one", "taints": [{"key": "local-capacity"}]})
    assert len(found) == 1 and found[0].startswith(
        "node.taints.0.key: 'local-capacity' is the capacity gate's"
    )
    gate = {"taint": {"key": "burst.example.com/gate"}}
    found = problems(
        tmp_path, gate=gate, nodes=[{"name": "vk-a", "taints": [{"key": "burst.example.com/gate"}]}]
    )
    assert len(found) == 1 and found[0].startswith("nodes.0.taints.0.key:")
    # the default gate key is free once the gate uses another
    assert load(tmp_path, gate=gate, node={"name": "vk-one", "taints": [{"key": "local-capacity"}]})


def test_the_deployments_pod_ip_variable_is_every_nodes_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped Deployment sets VKPROVIDER_NODE__INTERNAL_IP (node.internal_ip) to the pod IP:
    with nodes: that is each node's address, unless a node gives its own."""
    monkeypatch.setenv("VKPROVIDER_NODE__INTERNAL_IP", "10.1.2.3")
    settings = load(tmp_path, nodes=[{"name": "vk-a"}, {"name": "vk-b", "internal_ip": "10.9.9.9"}])
    assert [n.internal_ip for n in settings.node_list()] == ["10.1.2.3", "10.9.9.9"]
    monkeypatch.setenv("VKPROVIDER_NODE__NAME", "vk-one")  # more than the address: still refused
    found = problems(tmp_path, nodes=[{"name": "vk-a"}])
    assert len(found) == 1 and "node: may give only internal_ip" in found[0]
