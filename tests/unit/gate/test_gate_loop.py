"""One tick of the gate loop over fake caches: what it writes, and when it must not."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from tests.unit.gate.gate_fakes import VK_TOLERATION, FakeNodeApi, FakeView, node, pod, virtual_node
from vkprovider.gate import metrics
from vkprovider.gate.config import GateConfig
from vkprovider.gate.decision import Action
from vkprovider.gate.loop import Gate
from vkprovider.gate.signal import Reading, SignalUnavailable


class View(FakeView):
    def node(self, name: str) -> Any:
        return next((n for n in self.nodes_list if n["metadata"]["name"] == name), None)


class Writer:
    def __init__(self) -> None:
        self.calls: list[bool] = []

    async def set(self, present: bool) -> bool:
        self.calls.append(present)
        return True


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    async def record(self, involved: Any, kind: str, reason: str, message: str) -> None:
        self.recorded.append((kind, reason, message))


class Signal:
    kind = "fake"

    def __init__(self, free: float | None) -> None:
        self.free = free

    async def read(self) -> Reading:
        if self.free is None:
            raise SignalUnavailable("unreachable", "prometheus query 'q': connection refused")
        return Reading(free_gpus=self.free)


EPOCH = 1_800_000_000.0  #: the fake wall clock's zero


def gate(view: View, **cfg: Any) -> tuple[Gate, Writer, Events, list[float]]:
    clock = [0.0]
    g = Gate(
        FakeNodeApi(view.nodes_list),  # type: ignore[arg-type]
        GateConfig.model_validate({"dwell_seconds": 0, "min_flip_interval_seconds": 0, **cfg}),
        "vk",
        clock=lambda: clock[0],
        wall=lambda: EPOCH + clock[0],
        identity="gate-a",
    )
    g.view = view  # type: ignore[assignment]
    writer, events = Writer(), Events()
    g.writer, g.events = writer, events  # type: ignore[assignment]
    return g, writer, events, clock


async def test_taints_with_an_event_naming_the_reading() -> None:
    g, writer, events, _ = gate(View([node("a"), virtual_node()], []))
    metrics.STATE.start("vk")  # what run() does when a term begins
    try:
        assert (await g.tick(Signal(8))).action is Action.TAINT  # type: ignore[arg-type]
        assert writer.calls == [True]
        ((kind, reason, message),) = events.recorded
        assert (kind, reason) == ("Normal", "LocalCapacityAvailable") and "8 free local GPUs" in message
        assert REGISTRY.get_sample_value("vkprovider_gate_tainted", {"node": "vk"}) == 1
        assert REGISTRY.get_sample_value("vkprovider_gate_free_gpus", {"node": "vk"}) == 8
    finally:
        metrics.STATE.stop("vk")


async def test_a_missing_node_is_never_written() -> None:
    g, writer, events, _ = gate(View([node("a")], []))
    await g.tick(Signal(8))  # type: ignore[arg-type]
    assert writer.calls == [] and events.recorded == [] and g.flips == []


async def test_pending_burst_pods_untaint_and_the_timeout_warns() -> None:
    vk = virtual_node(taints=[{"key": "local-capacity", "value": "available", "effect": "NoSchedule"}])
    stuck = pod("stuck", phase="Pending", unschedulable=True, tolerations=[VK_TOLERATION])
    g, writer, events, clock = gate(View([node("a"), vk], [stuck]), signal_timeout_seconds=30)
    assert (await g.tick(Signal(8))).action is Action.UNTAINT  # type: ignore[arg-type]
    assert g.snapshot()["pending_blocked"] == ["ns/stuck"]

    vk2 = virtual_node(taints=[{"key": "local-capacity", "value": "available", "effect": "NoSchedule"}])
    g, writer, events, clock = gate(View([node("a"), vk2], []), signal_timeout_seconds=30)
    signal = Signal(None)
    assert (await g.tick(signal)).action is Action.HOLD  # type: ignore[arg-type]
    clock[0] = 31.0
    assert (await g.tick(signal)).action is Action.UNTAINT  # type: ignore[arg-type]
    assert writer.calls == [False]
    assert events.recorded[-1][:2] == ("Warning", "SignalUnavailable")
    assert g.snapshot()["signal_error"].startswith("unreachable")
    assert REGISTRY.get_sample_value(
        "vkprovider_gate_signal_errors_total", {"node": "vk", "kind": "unreachable"}
    )


async def test_our_taint_removed_by_someone_else_is_written_back() -> None:
    g, writer, _, _ = gate(View([node("a", 0), virtual_node()], []))
    g.decider.tainted = True  # we put it on; the node no longer has it
    assert (await g.tick(Signal(3))).action is Action.HOLD  # type: ignore[arg-type]  # in the band
    assert writer.calls == [True]
