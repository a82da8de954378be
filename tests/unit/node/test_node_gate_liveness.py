"""The node agent removes the gate's taint once no gate keeps it: a stale heartbeat, or none at
all for the timeout; never on a paused node, never another taint, never under a live renewal."""

from __future__ import annotations

from typing import Any

from tests.unit.gate.gate_fakes import FakeNodeApi, virtual_node
from vkprovider.kube.errors import KubeConflict
from vkprovider.kube.gate_heartbeat import HEARTBEAT_ANNOTATION, PAUSED_ANNOTATION, Heartbeat
from vkprovider.node.gate_liveness import GateLiveness

EPOCH = 1_800_000_000.0
GATE = {"key": "local-capacity", "value": "available", "effect": "NoSchedule"}
OTHER = {"key": "team.example/maintenance", "value": "planned", "effect": "NoSchedule"}


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    async def record(self, involved: Any, kind: str, reason: str, message: str) -> None:
        self.recorded.append((kind, reason, message))


def world(notes: dict[str, str]) -> tuple[GateLiveness, FakeNodeApi, Events, list[float]]:
    vk = virtual_node(taints=[GATE, OTHER])
    vk["metadata"]["annotations"] = notes
    api, events, clock = FakeNodeApi([vk]), Events(), [0.0]
    liveness = GateLiveness(
        api,  # type: ignore[arg-type]
        "vk",
        events,  # type: ignore[arg-type]
        orphan_timeout_seconds=120,
        wall=lambda: EPOCH + clock[0],
        clock=lambda: clock[0],
    )
    return liveness, api, events, clock


def beat(renewed: float, key: str = "local-capacity") -> str:
    return Heartbeat("lease:ns/vkprovider-vk", EPOCH + renewed, 60, key).to_annotation()


def keys(api: FakeNodeApi) -> list[str]:
    return [t["key"] for t in api.nodes["vk"]["spec"]["taints"]]


async def test_a_stale_heartbeat_loses_its_taint_with_a_warning_and_nothing_else() -> None:
    liveness, api, events, clock = world({HEARTBEAT_ANNOTATION: beat(0)})
    for second in range(0, 61, 5):  # fresh for its whole timeout: nothing happens
        clock[0] = float(second)
        await liveness.check(api.nodes["vk"])
    assert "local-capacity" in keys(api) and events.recorded == []
    clock[0] = 61.0
    await liveness.check(api.nodes["vk"])
    assert keys(api) == ["virtual-kubelet.io/provider", OTHER["key"]]
    ((kind, reason, message),) = events.recorded
    assert (kind, reason) == ("Warning", "GateHeartbeatExpired")
    assert "lease:ns/vkprovider-vk" in message and "61s old" in message
    await liveness.check(api.nodes["vk"])
    assert len(events.recorded) == 1  # said once


async def test_the_key_comes_from_the_heartbeat() -> None:
    liveness, api, _, clock = world({HEARTBEAT_ANNOTATION: beat(0, key="team.example/maintenance")})
    clock[0] = 100.0
    await liveness.check(api.nodes["vk"])
    assert keys(api) == ["virtual-kubelet.io/provider", "local-capacity"]


async def test_a_paused_node_keeps_the_operators_taint() -> None:
    liveness, api, events, clock = world({HEARTBEAT_ANNOTATION: beat(0), PAUSED_ANNOTATION: "yes"})
    clock[0] = 1000.0
    await liveness.check(api.nodes["vk"])
    assert "local-capacity" in keys(api) and events.recorded == [] and api.patches == []


async def test_a_taint_without_heartbeat_goes_after_the_timeout() -> None:
    liveness, api, events, clock = world({})
    for second in range(0, 120, 10):
        clock[0] = float(second)
        await liveness.check(api.nodes["vk"])
    assert "local-capacity" in keys(api)
    clock[0] = 121.0
    await liveness.check(api.nodes["vk"])
    assert "local-capacity" not in keys(api) and OTHER["key"] in keys(api)
    assert "no gate heartbeat" in events.recorded[0][2]


async def test_a_renewal_racing_the_removal_wins() -> None:
    """The gate renews between our read and our write: the write is refused (409), the fresh
    read shows a live heartbeat, and the taint stays."""
    liveness, api, events, clock = world({HEARTBEAT_ANNOTATION: beat(0)})
    clock[0] = 70.0
    real = api.request

    async def renewing_first(method: str, path: str, **kw: Any) -> Any:
        if method == "PATCH" and not api.patches:
            api.nodes["vk"]["metadata"]["annotations"][HEARTBEAT_ANNOTATION] = beat(69.5)
            api.nodes["vk"]["metadata"]["resourceVersion"] += "0"
            raise KubeConflict(409, "modified")
        return await real(method, path, **kw)

    api.request = renewing_first  # type: ignore[method-assign]
    await liveness.check(api.nodes["vk"])
    assert "local-capacity" in keys(api) and events.recorded == []


async def test_cheap_when_the_cached_copy_is_healthy() -> None:
    liveness, api, _, clock = world({HEARTBEAT_ANNOTATION: beat(0)})
    reads = 0
    real = api.request

    async def counting(method: str, path: str, **kw: Any) -> Any:
        nonlocal reads
        reads += method == "GET"
        return await real(method, path, **kw)

    api.request = counting  # type: ignore[method-assign]
    cached = dict(api.nodes["vk"])
    for tenth in range(0, 300):  # 30 s of checks every 0.1 s
        clock[0] = tenth / 10
        await liveness.check(cached)
    assert 1 <= reads <= 3  # one read per quarter heartbeat timeout (15 s), not one per check

    reads = 0
    quiet = dict(api.nodes["vk"], metadata={"name": "vk"}, spec={"taints": []})
    for tenth in range(300, 600):  # no gate on this node: no reads at all
        clock[0] = tenth / 10
        await liveness.check(quiet)
    assert reads == 0
