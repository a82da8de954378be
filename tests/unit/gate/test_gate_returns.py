"""One gate tick with the return wave: the marks it writes (label merge patches), the Event
naming the owner of a replica that did not come home, and the units the decision reads."""

from __future__ import annotations

from typing import Any

from tests.unit.gate.test_gate_fit import node, vk
from tests.unit.gate.test_gate_gangs import cluster_queue, gangs, workload
from tests.unit.gate.test_gate_loop import Signal, View, gate
from tests.unit.gate.test_gate_wave import replica
from vkprovider.gate.returns import ReturnHome
from vkprovider.gate.wave_config import MARK_LABEL


class Kube:
    """Answers the owner and PDB reads; records every write."""

    def __init__(self, *, pinned: str = "") -> None:
        self.pinned = pinned
        self.writes: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        if method == "GET" and "/replicasets/" in path:
            return {"metadata": {"uid": "rs-1"}, "spec": {"template": {"spec": {"nodeName": self.pinned}}}}
        if method == "GET" and path.endswith("/poddisruptionbudgets"):
            return {"items": [{"spec": {"selector": {"matchLabels": {"app": "inf"}}}}]}
        self.writes.append((method, path, kw.get("body")))
        return {}


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[Any, str, str, str]] = []

    async def record(self, involved: Any, kind: str, reason: str, message: str) -> None:
        self.recorded.append((involved, kind, reason, message))


def setup(
    pods: list[Any], *, pinned: str = "", dry_run: bool = False, **cfg: Any
) -> tuple[Any, Kube, Events]:
    view = View([node("a", 2), vk()], pods)
    g, _, _, _ = gate(view, taint_at_free_gpus=2, dry_run=dry_run)
    kube, events = Kube(pinned=pinned), Events()
    g.returns = ReturnHome(kube, g.config, "vk", events)  # type: ignore[arg-type]
    g.returns.planner.config = g.returns.config = g.config.return_home.model_copy(update=cfg)
    return g, kube, events


async def test_the_tick_marks_what_fits_and_the_decision_reads_the_wave() -> None:
    g, kube, _ = setup([replica("r1", price=2), replica("r2", price=3), replica("r3", price=1)])
    decision = await g.tick(Signal(free=16))  # the raw reading says 16; only 2 replicas fit
    marks = [(path.rsplit("/", 1)[1], body["metadata"]["labels"]) for _, path, body in kube.writes]
    assert marks == [("r2", {MARK_LABEL: "true"}), ("r1", {MARK_LABEL: "true"})]
    assert decision.action.value == "taint"
    assert decision.message.startswith("2 GPUs of external replicas that fit locally")


async def test_a_pinned_template_is_never_marked_and_nothing_taints() -> None:
    g, kube, _ = setup([replica("r1")], pinned="vk")
    decision = await g.tick(Signal(free=16))
    assert kube.writes == [] and decision.action.value == "hold"


async def test_dry_run_writes_no_mark() -> None:
    g, kube, _ = setup([replica("r1")], dry_run=True)
    await g.tick(Signal(free=16))
    assert kube.writes == []


async def test_a_replacement_that_never_came_home_is_an_event_on_its_owner() -> None:
    g, _, events = setup([replica("r1")], come_home_seconds=5)
    clock = [0.0]
    g._clock = lambda: clock[0]
    await g.tick(Signal(free=16))
    g.view.pods_list = []  # evicted; its replacement never appears
    clock[0] = 1.0
    await g.tick(Signal(free=16))
    clock[0] = 10.0
    await g.tick(Signal(free=16))
    ((involved, kind, _, message),) = [e for e in events.recorded if e[2] == "ReturnHomeFailed"]
    assert (involved["kind"], involved["name"], kind) == ("ReplicaSet", "inf-abc", "Warning")
    assert "ns/r1" in message and "no replacement was created" in message


class Kueue:
    """A KueueView stand-in: the gangs it reads (``None``: its caches are still syncing)."""

    def __init__(self, gangs: list[Any] | None) -> None:
        self.read = gangs

    def gangs(self, pods: Any = ()) -> list[Any] | None:
        return self.read


async def test_the_tick_reserves_kueues_next_gang_and_waits_for_its_caches() -> None:
    g, kube, _ = setup([replica("r1", price=2), replica("r2", price=3)])
    g.view.kueue = Kueue(None)  # syncing: no wave, no write
    await g.tick(Signal(free=16))
    assert kube.writes == []
    g.view.kueue = Kueue(gangs(workload("train", count=1), cq=cluster_queue(nominal=1)))
    await g.tick(Signal(free=16))  # 2 local GPUs, one taken by the gang Kueue admits next
    assert [path.rsplit("/", 1)[1] for _, path, _ in kube.writes] == ["r2"]
    assert g.returns.snapshot()["kueue_gangs"] == ["ns/train"]
