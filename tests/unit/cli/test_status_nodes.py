"""``vkprovider status`` with several virtual nodes: each node's view from the replica that
leads it, and a replica that stands by for the first node but leads others is no standby."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from vkprovider.cli import admin_client, status

JSON = dict[str, Any]


def leading(node: str, pods: int) -> JSON:
    return {"node": node, "role": "leader", "pods": pods, "deployments": pods, "queue": {}}


def standby(node: str, leader: str) -> JSON:
    return {"node": node, "role": "standby", "leader": leader}


R1 = {**leading("vk-a", 1), "nodes": [leading("vk-a", 1), standby("vk-b", "r2"), standby("vk-c", "r2")]}
R2 = {**standby("vk-a", "r1"), "nodes": [standby("vk-a", "r1"), leading("vk-b", 2), leading("vk-c", 3)]}


def test_each_node_is_taken_from_its_leader() -> None:
    merged = admin_client.merged_nodes([R2, R1])
    assert merged is not None
    assert [(n["node"], n["role"], n.get("pods")) for n in merged] == [
        ("vk-a", "leader", 1),
        ("vk-b", "leader", 2),
        ("vk-c", "leader", 3),
    ]
    assert admin_client.merged_nodes([leading("vk", 1)]) is None  # one node: the old shape


def test_a_replica_leading_later_nodes_is_no_standby(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"http://r1": R1, "http://r2": R2}
    monkeypatch.setattr(admin_client, "request", lambda url, *_: answers[url])
    view = admin_client.leader_state(["http://r2", "http://r1"], None, 1.0)  # type: ignore[arg-type]
    assert view.standbys == {}
    assert [n["role"] for n in view.state["nodes"]] == ["leader"] * 3
    only_r2 = admin_client.leader_state(["http://r2"], None, 1.0)  # type: ignore[arg-type]
    assert only_r2.url == "http://r2"  # it leads vk-b and vk-c: its answer is used
    assert [n["role"] for n in only_r2.state["nodes"]] == ["standby", "leader", "leader"]

    console = Console(record=True, width=200)
    status.render(only_r2.state, console)
    text = console.export_text()
    assert "node vk-a (standby: the leader is r1)" in text
    assert "node vk-b (leader)" in text and "node vk-c (leader)" in text
