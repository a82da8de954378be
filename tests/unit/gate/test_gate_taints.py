"""Only the gate's taint changes; everyone else's survive, in order; selectors and tolerations."""

from __future__ import annotations

import pytest

from tests.unit.gate.gate_fakes import VK_TOLERATION, pod, virtual_node
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.pending import blocked_by_gate
from vkprovider.gate.selector import parse_selector, tolerates
from vkprovider.gate.taint import has_taint, with_taint

CFG = TaintConfig()
OTHERS = [
    {"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"},
    {"key": "someone-else", "value": "x", "effect": "NoSchedule"},
]


def test_adding_keeps_every_other_taint_in_order() -> None:
    result = with_taint(OTHERS, CFG, True)
    assert result[:2] == OTHERS
    assert {k: result[2][k] for k in ("key", "value", "effect")} == CFG.as_taint()
    assert "timeAdded" in result[2]


def test_adding_twice_changes_nothing_and_keeps_time_added() -> None:
    once = with_taint(OTHERS, CFG, True)
    assert with_taint(once, CFG, True) == once


def test_removing_touches_only_ours() -> None:
    foreign_same_key_other_effect = {
        "key": "local-capacity",
        "value": "available",
        "effect": "PreferNoSchedule",
    }
    current = [*with_taint(OTHERS, CFG, True), foreign_same_key_other_effect]
    assert with_taint(current, CFG, False) == [*OTHERS, foreign_same_key_other_effect]
    assert has_taint({"spec": {"taints": current}}, CFG) is True
    assert has_taint({"spec": {"taints": OTHERS}}, CFG) is False
    assert has_taint(None, CFG) is None


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("pool=local-gpu", {"pool": "local-gpu"}, True),
        ("pool==local-gpu", {"pool": "cpu"}, False),
        ("pool!=cpu", {}, True),
        ("pool", {"pool": ""}, True),
        ("!spot", {"spot": "true"}, False),
        ("pool=local-gpu, zone=a", {"pool": "local-gpu", "zone": "a"}, True),
        ("pool=local-gpu,zone=a", {"pool": "local-gpu"}, False),
    ],
)
def test_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(selector)(labels) is expected


def test_tolerations_follow_the_scheduler() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates([{"key": "k", "operator": "Exists"}], taint)
    assert tolerates([{"key": "k", "value": "v"}], taint)
    assert not tolerates([{"key": "k", "value": "w"}], taint)
    assert not tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([], taint)


def test_only_pods_the_gate_keeps_out_count_as_blocked() -> None:
    vk = virtual_node(taints=[CFG.as_taint()])
    pods = [
        pod("burstable", unschedulable=True, phase="Pending", tolerations=[VK_TOLERATION]),
        pod("training", 8, unschedulable=True, phase="Pending"),  # does not tolerate the virtual node
        pod("preempting", unschedulable=True, phase="Pending", nominated="a", tolerations=[VK_TOLERATION]),
        pod(
            "tolerates-gate",
            unschedulable=True,
            phase="Pending",
            tolerations=[VK_TOLERATION, {"key": "local-capacity", "operator": "Exists"}],
        ),
        pod(
            "local-only",
            unschedulable=True,
            phase="Pending",
            tolerations=[VK_TOLERATION],
            node_selector={"pool": "local-gpu"},
        ),
        pod("scheduling", phase="Pending", tolerations=[VK_TOLERATION]),  # not yet judged unschedulable
        pod("running", node_name="a", tolerations=[VK_TOLERATION]),
    ]
    assert blocked_by_gate(pods, vk, CFG) == ["ns/burstable"]


def test_pods_nominated_to_local_nodes_count_as_preempting() -> None:
    from vkprovider.gate.pending import preempting

    pods = [
        pod("train", 8, phase="Pending", nominated="gpu-0"),
        pod("bound", 8, node_name="gpu-1", nominated="gpu-1"),  # already bound: done
        pod("to-vk", 1, phase="Pending", nominated="vk"),  # nominated to the virtual node itself
        pod("plain", 1, phase="Pending"),
    ]
    assert preempting(pods, "vk") == 1
