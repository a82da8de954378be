"""The gate's liveness, ownership and Pending rule against a real control plane and scheduler:
two gates on one node do not undo each other, an operator's pause is respected, a killed gate's
taint is removed by the node agent, and pods the taint does not keep out never hold it off."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.gate_support import (
    GATE_TAINT,
    FixedSignal,
    create_namespace,
    node_taints,
    running_gate,
)
from tests.serve_process import ServeProcess
from tests.support import background, eventually, vkprovider_process
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import free_port
from vkprovider.gate.config import GateConfig
from vkprovider.gate.loop import Gate
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.gate_heartbeat import PAUSED_ANNOTATION
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
FAST = {"dwell_seconds": 0, "min_flip_interval_seconds": 0, "interval_seconds": 0.2}


@pytest.fixture
async def vnode(cluster: Cluster, kube: KubeClient) -> AsyncIterator[VirtualNode]:
    """A real virtual node: vkprovider's node agent and pod controller, in-process."""
    node = await start_virtual_node(cluster, {"cheap": cloud_config("cheap", 1.0, capacity=8)})
    yield node
    await node.stop()
    await kube.request("DELETE", f"/api/v1/nodes/{node.name}")


def fixed_gate(kube: KubeClient, node: str, identity: str, free: float, **cfg: Any) -> Gate:
    config = GateConfig.model_validate({**FAST, "signal_timeout_seconds": 4, "identity": identity, **cfg})
    return Gate(kube, config, node, signal_factory=lambda *_: FixedSignal(free))


async def tainted(kube: KubeClient, node: str) -> bool:
    return any(t["key"] == GATE_TAINT for t in await node_taints(kube, node))


async def node_events(kube: KubeClient, node: str, reason: str) -> list[JSON]:
    body = await kube.request(
        "GET", "/api/v1/namespaces/default/events", query={"fieldSelector": f"involvedObject.name={node}"}
    )
    return [e for e in body["items"] if e.get("reason") == reason]


async def sample_taint(kube: KubeClient, node: str, seconds: float) -> list[bool]:
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append(await tainted(kube, node))
        await asyncio.sleep(0.1)
    return samples


async def test_a_second_gate_refuses_and_takes_over_only_when_the_first_is_gone(
    kube: KubeClient, bare_node: str
) -> None:
    first = fixed_gate(kube, bare_node, "gate-a", free=16)  # wants the taint on
    second = fixed_gate(kube, bare_node, "gate-b", free=0)  # wants it off
    async with background(first.run()) as first_task:
        await eventually(lambda: tainted(kube, bare_node), timeout=30)
        async with background(second.run()):
            samples = await sample_taint(kube, bare_node, 6.0)  # ~30 ticks of each gate
            flips = sum(a != b for a, b in itertools.pairwise(samples))
            print(
                f"two gates, 6 s: {len(samples)} samples, {flips} taint changes, writes "
                f"first={first.writer.writes} second={second.writer.writes}"
            )
            assert all(samples) and flips == 0
            assert second.writer.writes == 0 and second.claim.renewals == 0
            assert first.writer.writes == 1
            (event,) = await node_events(kube, bare_node, "GateOwnerConflict")
            assert event["type"] == "Warning" and "'gate-a' owns the taint" in event["message"]
            assert second.snapshot()["decision"]["reason"] == "GateOwnerConflict"

            first_task.cancel()  # the first gate dies; its heartbeat goes stale (2 s)
            with contextlib.suppress(asyncio.CancelledError):
                await first_task
            await eventually(lambda: _untainted(kube, bare_node), timeout=30)
            assert second.writer.writes == 1  # took over, then untainted as its signal says


async def _untainted(kube: KubeClient, node: str) -> bool:
    return not await tainted(kube, node)


async def test_an_operator_pause_is_respected_and_a_manual_untaint_not_undone(
    kube: KubeClient, bare_node: str
) -> None:
    gate = fixed_gate(kube, bare_node, "gate-a", free=16)
    async with background(gate.run()):
        await eventually(lambda: tainted(kube, bare_node), timeout=30)
        body = await kube.request("GET", f"/api/v1/nodes/{bare_node}")
        patch = {
            "metadata": {
                "resourceVersion": body["metadata"]["resourceVersion"],
                "annotations": {PAUSED_ANNOTATION: "oncall: investigating"},
            },
            "spec": {"taints": [t for t in body["spec"]["taints"] if t["key"] != GATE_TAINT]},
        }
        await kube.request("PATCH", f"/api/v1/nodes/{bare_node}", body=patch, content_type=MERGE_PATCH)
        samples = await sample_taint(kube, bare_node, 4.0)  # ~20 gate ticks
        assert not any(samples) and gate.writer.writes == 1
        assert (await node_events(kube, bare_node, "GatePaused"))[0]["type"] == "Warning"

        unpause = {"metadata": {"annotations": {PAUSED_ANNOTATION: None}}}
        await kube.request("PATCH", f"/api/v1/nodes/{bare_node}", body=unpause, content_type=MERGE_PATCH)
        await eventually(lambda: tainted(kube, bare_node), timeout=30)  # the gate decides again
        assert await node_events(kube, bare_node, "GateResumed")


def gate_config(tmp_path: Path, node: str, timeout: float) -> Path:
    config = {
        "node": {"name": node},
        "http": {"admin_port": free_port()},
        "providers": [],
        "gate": {
            "taint_at_free_gpus": 1,
            **FAST,
            "interval_seconds": 0.5,
            "signal_timeout_seconds": timeout,
            "identity": "standalone-test",
        },
    }
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_a_killed_gates_taint_is_removed_by_the_node_agent(
    cluster: Cluster, vnode: VirtualNode, kube: KubeClient, tmp_path: Path
) -> None:
    timeout = 8.0
    log = tmp_path / "gate.log"
    proc = vkprovider_process("gate", gate_config(tmp_path, vnode.name, timeout), cluster.kubeconfig, log)
    try:

        async def gate_tainted() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return await tainted(kube, vnode.name)

        await eventually(gate_tainted, timeout=90)
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        killed = time.monotonic()
        await eventually(lambda: _untainted(kube, vnode.name), timeout=10 * timeout)
        print(
            f"gate killed -> taint removed by the node agent after {time.monotonic() - killed:.1f}s "
            f"(signal_timeout_seconds {timeout:g})"
        )
        # the Event is written after the taint is removed, by the recorder's background sender
        (event,) = await eventually(lambda: node_events(kube, vnode.name, "GateHeartbeatExpired"), timeout=30)
        assert event["type"] == "Warning" and "'standalone-test' stopped renewing" in event["message"]
        taints = [t["key"] for t in await node_taints(kube, vnode.name)]
        assert "virtual-kubelet.io/provider" in taints  # only the gate's taint went
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def burst_pod(name: str, gpus: int, **spec: Any) -> JSON:
    return {
        "metadata": {"name": name},
        "spec": {
            "tolerations": [
                {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.example/llm:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
            **spec,
        },
    }


async def unschedulable(kube: KubeClient, namespace: str, name: str) -> bool:
    pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions") or []
    )


async def test_pods_the_taint_does_not_keep_out_do_not_hold_it_off(
    vnode: VirtualNode, kube: KubeClient
) -> None:
    namespace = await create_namespace(kube)
    vk = await kube.request("GET", f"/api/v1/nodes/{vnode.name}")
    assert int(vk["status"]["allocatable"]["nvidia.com/gpu"]) < 16
    pods = f"/api/v1/namespaces/{namespace}/pods"
    async with running_gate(kube, vnode.name, dwell_seconds=0, min_flip_interval_seconds=0) as gate:
        await eventually(lambda: tainted(kube, vnode.name), timeout=60)
        # a stray 16-GPU pod: fits no local node (8 each) and not the virtual node either
        await kube.request("POST", pods, body=burst_pod("sixteen", 16))
        # a pod pinned by matchFields to another node, as the DaemonSet controller pins its pods
        pinned = {"key": "metadata.name", "operator": "In", "values": [f"{vnode.name}-elsewhere"]}
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [pinned]}]
                }
            }
        }
        await kube.request("POST", pods, body=burst_pod("pinned", 1, affinity=affinity))
        for name in ("sixteen", "pinned"):

            async def pending(pod: str = name) -> bool:
                return await unschedulable(kube, namespace, pod)

            await eventually(pending, timeout=60)
        samples = await sample_taint(kube, vnode.name, 4.0)  # ~8 gate ticks with both Pending
        assert all(samples) and gate.blocked == []
        assert [f["direction"] for f in gate.flips] == ["taint"]

        # control: a 1-GPU pod only the virtual node can take IS kept out by the taint
        only_vk = burst_pod("burstable", 1, nodeSelector={"type": "virtual-kubelet"})
        await kube.request("POST", pods, body=only_vk)
        await eventually(lambda: _untainted(kube, vnode.name), timeout=60)
        # the untaint names the pod; once the pod lands on the virtual node nothing is Pending any
        # more and, with no dwell, the gate may taint again before this line reads the flips
        # (the gate records the flip after its heartbeat renew: wait for the record too)

        async def untaint_recorded() -> list[dict[str, Any]]:
            return [f for f in gate.flips[1:] if f["direction"] == "untaint"]

        untaints = await eventually(untaint_recorded, timeout=30)
        assert "1 pod(s)" in untaints[0]["message"], gate.flips
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")


async def test_removing_the_gate_section_ends_with_the_taint_gone(
    cluster: Cluster, cloud: Any, kube: KubeClient, tmp_path: Path
) -> None:
    """``serve`` with a gate taints; the operator removes ``gate:`` and restarts ``serve``: its
    node agent removes the taint the gate left (the heartbeat stopped with the gate)."""
    from tests.integration.test_gate_serve import GATE, serve_config

    node = f"vk-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "serve.yaml"
    serve = ServeProcess.configured(
        serve_config(node, cloud.url, {**GATE, "signal_timeout_seconds": 8}), config, cluster.kubeconfig
    )
    serve.start()
    try:

        async def serve_tainted() -> bool:
            assert serve.alive(), serve.log_tail()
            with contextlib.suppress(Exception):
                return await tainted(kube, node)
            return False  # not registered yet

        await eventually(serve_tainted, timeout=90)
        assert await serve.stop() == 0
        assert await tainted(kube, node)  # nothing runs: nothing removes it yet
        serve = ServeProcess.configured(serve_config(node, cloud.url, None), config, cluster.kubeconfig)
        serve.start()
        await eventually(lambda: _untainted(kube, node), timeout=90)
        (event,) = await eventually(lambda: node_events(kube, node, "GateHeartbeatExpired"), timeout=30)
        assert "/serve' stopped renewing" in event["message"]
        assert await serve.stop() == 0
    finally:
        await serve.close()
        await kube.request("DELETE", f"/api/v1/nodes/{node}")
