"""The gate's taint writes against a real apiserver: another writer's taint survives every flip
(even racing it), and stopping the gate - cleanly or by crash - does not itself remove the taint
(the node agent does, once the gate's heartbeat is stale: test_gate_liveness.py)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.integration.gate_support import GATE_TAINT, FixedSignal, node_taints
from tests.support import eventually
from vkprovider.gate.config import GateConfig, TaintConfig
from vkprovider.gate.loop import Gate
from vkprovider.gate.taint import TaintWriter
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict

pytestmark = pytest.mark.cluster

OTHER = "other.example/flag"


async def set_other(kube: KubeClient, node: str, present: bool) -> None:
    """The other writer: also a resourceVersion-guarded read-modify-write, of its own key."""
    while True:
        body = await kube.request("GET", f"/api/v1/nodes/{node}")
        taints = [t for t in body["spec"].get("taints") or [] if t["key"] != OTHER]
        if present:
            taints.append({"key": OTHER, "value": "x", "effect": "NoSchedule"})
        patch = {
            "metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
            "spec": {"taints": taints},
        }
        with contextlib.suppress(KubeConflict):
            await kube.request("PATCH", f"/api/v1/nodes/{node}", body=patch, content_type=MERGE_PATCH)
            return


async def test_a_racing_writers_taint_survives_every_flip(kube: KubeClient, bare_node: str) -> None:
    writer = TaintWriter(kube, bare_node, TaintConfig())

    async def gate_flips() -> None:
        for i in range(30):
            await writer.set(i % 2 == 0)

    async def other_flips() -> None:
        for i in range(31):
            await set_other(kube, bare_node, i % 2 == 0)

    await asyncio.gather(gate_flips(), other_flips())
    taints = await node_taints(kube, bare_node)
    keys = [t["key"] for t in taints]
    assert keys.count(OTHER) == 1  # the other writer's last word (present) stands
    assert GATE_TAINT not in keys  # and so does ours (absent)
    assert writer.writes == 30


async def test_stopping_or_crashing_the_gate_leaves_the_taint(kube: KubeClient, bare_node: str) -> None:
    config = GateConfig(dwell_seconds=0, min_flip_interval_seconds=0, interval_seconds=0.2)
    signal = FixedSignal(16)
    gate = Gate(kube, config, bare_node, signal_factory=lambda *_: signal)
    task = asyncio.create_task(gate.run())

    async def tainted() -> bool:
        return any(t["key"] == GATE_TAINT for t in await node_taints(kube, bare_node))

    await eventually(tainted, timeout=30)
    task.cancel()  # as on SIGTERM or lost leadership
    with contextlib.suppress(asyncio.CancelledError):
        await task
    signal.free = 0  # local capacity gone meanwhile: nobody is running to act on it
    await asyncio.sleep(1.0)
    assert await tainted()

    # a new term adopts the node's state: it does not re-flip what is already there
    again = Gate(kube, config, bare_node, signal_factory=lambda *_: FixedSignal(16))
    task = asyncio.create_task(again.run())
    await eventually(lambda: asyncio.sleep(0, again.last_decision is not None), timeout=30)
    assert again.decider.tainted is True and again.flips == []
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert await tainted()


async def test_dry_run_decides_and_records_but_writes_nothing(kube: KubeClient, bare_node: str) -> None:
    config = GateConfig(dwell_seconds=0, min_flip_interval_seconds=0, interval_seconds=0.2, dry_run=True)
    signal = FixedSignal(16)
    gate = Gate(kube, config, bare_node, signal_factory=lambda *_: signal)
    task = asyncio.create_task(gate.run())
    try:
        await eventually(lambda: asyncio.sleep(0, gate.flips), timeout=30)
        signal.free = 0
        await eventually(lambda: asyncio.sleep(0, len(gate.flips) == 2), timeout=30)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [f["direction"] for f in gate.flips] == ["taint", "untaint"]
    assert gate.writer.writes == 0
    assert GATE_TAINT not in [t["key"] for t in await node_taints(kube, bare_node)]
    body = await kube.request(
        "GET",
        "/api/v1/namespaces/default/events",
        query={"fieldSelector": f"involvedObject.name={bare_node}"},
    )
    assert not [e for e in body["items"] if e.get("reportingComponent") == "vkprovider-gate"]
