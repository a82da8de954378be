"""The kube signal: free GPUs on usable local nodes, net of bound pods and nominated pods."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.gate.gate_fakes import FakeView, node, pod, virtual_node
from vkprovider.errors import ConfigError
from vkprovider.gate.config import KubeSignalConfig
from vkprovider.gate.kube_signal import KubeSignal
from vkprovider.gate.signal import SignalUnavailable
from vkprovider.gate.view import pod_demand


def signal(view: FakeView, **cfg: Any) -> KubeSignal:
    return KubeSignal(view, KubeSignalConfig.model_validate(cfg))  # type: ignore[arg-type]


async def test_free_is_allocatable_minus_bound_requests() -> None:
    view = FakeView(
        [node("a"), node("b"), virtual_node()],
        [pod("p1", 2, node_name="a"), pod("p2", 3, node_name="b"), pod("ext", 1, node_name="vk")],
    )
    reading = await signal(view).read()
    assert reading.free_gpus == 11
    assert reading.detail == {"a": 6, "b": 5}
    assert reading.preempting == 0


async def test_a_preemption_in_progress_never_reads_as_free() -> None:
    # training is nominated to both nodes while its victims are still terminating
    view = FakeView(
        [node("a"), node("b")],
        [
            pod("victim", 1, node_name="a"),
            pod("train-0", 8, phase="Pending", nominated="a"),
            pod("train-1", 8, phase="Pending", nominated="b"),
        ],
    )
    reading = await signal(view).read()
    assert reading.free_gpus == 0
    assert reading.preempting == 2


async def test_unusable_nodes_do_not_count() -> None:
    view = FakeView(
        [
            node("ok"),
            node("notready", ready=False),
            node("cordoned", unschedulable=True),
            node("tainted", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
            node("tolerated", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
            node("prefer", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]),
            node("other-pool", labels={"pool": "cpu"}),
        ],
        [],
    )
    cfg = {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes"}]}
    reading = await signal(view, **cfg).read()
    assert set(reading.detail) == {"ok", "tolerated", "prefer"}
    assert reading.free_gpus == 24


async def test_terminal_pods_free_their_gpus() -> None:
    view = FakeView([node("a")], [pod("done", 4, node_name="a", phase="Succeeded")])
    assert (await signal(view).read()).free_gpus == 8


async def test_not_synced_is_unavailable() -> None:
    with pytest.raises(SignalUnavailable) as err:
        await signal(FakeView([node("a")], [], synced=False)).read()
    assert err.value.kind == "not_synced"


async def test_a_selector_matching_no_node_is_signal_unavailable_naming_the_field() -> None:
    """Not a stuck term: the decision fails open after signal_timeout (start-up refusal of a
    typo is Gate.preflight's job)."""
    s = signal(FakeView([node("a")], []), node_selector="pool=gpu-typo")
    await s.start()
    with pytest.raises(SignalUnavailable, match=r"node_selector 'pool=gpu-typo' matches no node") as err:
        await s.read()
    assert err.value.kind == "no_nodes"


def test_an_unparsable_selector_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"gate\.signal\.kube\.node_selector"):
        signal(FakeView([], []), node_selector="pool in (a")


def test_pod_demand_follows_the_scheduler() -> None:
    p = pod("x", 2)
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": "3"}}}]
    assert pod_demand(p, "nvidia.com/gpu") == 3
    p["spec"]["overhead"] = {"nvidia.com/gpu": "1"}
    assert pod_demand(p, "nvidia.com/gpu") == 4
    assert pod_demand(pod("cpu-only", 0), "nvidia.com/gpu") == 0
