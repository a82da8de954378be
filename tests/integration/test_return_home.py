"""The closed loop, end to end, on a real control plane with the real descheduler and real
fakecloud servers: training takes the local GPUs, inference bursts out, training ends, the gate
taints, and the descheduler brings the replicas home a few at a time within their PDB.

The module starts its own cluster: its kwok pods take time (a replica is Ready 10 s after it
is bound, like a model loading; a training pod runs 25 s), which the session cluster does not do.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator

import pytest

from tests.integration.gate_support import (
    GATE_TAINT,
    Timeline,
    add_foreign_taint,
    apply,
    blocker,
    cloud_deployments,
    create_namespace,
    example,
    inference,
    is_ready,
    node_taints,
    pods,
    running_gate,
    training,
)
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.descheduler import return_home_policy, start_descheduler, stop_descheduler
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
async def slow_cluster() -> AsyncIterator[Cluster]:
    started = await Cluster.start(f"gate-{os.getpid()}", gpu_nodes=2, pod_delays=True)
    try:
        yield started
    finally:
        await started.stop(remove=not os.environ.get("VKPROVIDER_TEST_KEEP_CLUSTER"))


@pytest.fixture
async def vnode(slow_cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(slow_cluster, {"cheap": cloud_config("cheap", 1.0, capacity=8)})
    yield node
    await node.stop()


@pytest.fixture
async def kube(vnode: VirtualNode) -> AsyncIterator[KubeClient]:
    assert vnode.kube is not None
    for doc in example("priority-classes.yaml"):
        await apply(vnode.kube, "", doc)
    yield vnode.kube


@pytest.fixture
async def ns(kube: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace, deleted (and its pods gone) after the test: the next test of the
    module shares the cluster's local GPUs."""
    name = await create_namespace(kube)
    yield name
    await kube.request("DELETE", f"/api/v1/namespaces/{name}")

    async def empty() -> bool:
        body = await kube.request("GET", f"/api/v1/namespaces/{name}/pods")
        return not body["items"]

    await eventually(empty, timeout=120)


async def ready_where(kube: KubeClient, ns: str, node: str, *, local: int, external: int) -> bool:
    inf = await pods(kube, ns, "inference")
    ready = [p for p in inf if is_ready(p)]
    out = sum(1 for p in ready if p["spec"].get("nodeName") == node)
    return out == external and len(ready) - out == local and len(inf) == local + external


async def settle(kube: KubeClient, ns: str, node: str, *, local: int, external: int, timeout: float) -> None:
    """Wait until exactly ``local`` + ``external`` replicas are Ready where said; on timeout, fail
    with where every replica is (so a failure says what the cluster did)."""
    try:
        await eventually(lambda: ready_where(kube, ns, node, local=local, external=external), timeout=timeout)
    except TimeoutError:
        state = [
            (
                p["metadata"]["name"],
                p["spec"].get("nodeName"),
                p["status"].get("phase"),
                is_ready(p),
                [(c["type"], c["status"], c.get("reason")) for c in p["status"].get("conditions") or []],
            )
            for p in await pods(kube, ns, "inference")
        ]
        raise AssertionError(f"want {local} local + {external} external Ready; replicas: {state}") from None


async def test_training_pushes_inference_out_and_it_comes_home_within_its_budget(
    slow_cluster: Cluster, vnode: VirtualNode, kube: KubeClient, ns: str
) -> None:
    await add_foreign_taint(kube, vnode.name)
    policy = return_home_policy(namespaces=[ns], per_node=2, per_namespace=2, total=4, min_pod_age="3s")
    descheduler = await start_descheduler(slow_cluster, policy, interval_seconds=2)
    timeline = Timeline(kube, ns, vnode)
    timeline.start()
    try:
        async with running_gate(kube, vnode.name) as gate:
            timeline.gate = gate
            # 16 local GPUs free: the gate taints, and all 6 replicas start locally
            await eventually(lambda: _tainted(kube, vnode.name, True), timeout=60)
            for doc in inference(6):
                await apply(kube, ns, doc)
            await settle(kube, ns, vnode.name, local=6, external=0, timeout=120)
            timeline.note("--- 6 replicas Ready locally; starting the training Job (2 x 8 GPUs)")

            training_started = time.monotonic()
            await apply(kube, ns, training("25s"))
            await eventually(lambda: _tainted(kube, vnode.name, False), timeout=60)
            timeline.note("--- gate removed its taint")
            await settle(kube, ns, vnode.name, local=0, external=6, timeout=120)
            timeline.note("--- all 6 replicas Ready on the virtual node")
            assert await cloud_deployments(vnode) == 6

            await eventually(lambda: _job_complete(kube, ns), timeout=180)
            training_done = time.monotonic()
            timeline.note("--- training Job complete")
            # once untainted, the gate never tainted again while training preempted or ran
            during = [s.tainted for s in timeline.since(training_started) if s.at < training_done - 1]
            assert False in during and True not in during[during.index(False) :]

            await eventually(lambda: _tainted(kube, vnode.name, True), timeout=60)
            return_started = time.monotonic()
            timeline.note("--- gate tainted: the return begins")
            await settle(kube, ns, vnode.name, local=6, external=0, timeout=300)
            await eventually(lambda: _no_deployments(vnode), timeout=60)
            timeline.note("--- all 6 home, no external deployment left")
            returned = timeline.since(return_started)
            snapshot = gate.snapshot()
        await stop_descheduler(slow_cluster, descheduler)
        final = await timeline.sample()
    finally:
        evictions = await timeline.finish(descheduler.log)
        print("\n" + "\n".join(timeline.lines))  # the closing note's timeline (pytest -s)

    assert len(returned) >= 10, "sampled every second through the return"
    assert min(len(s.ready_local) + len(s.ready_external) for s in returned) >= 5  # the PDB held
    assert max(len(s.terminating_external) for s in returned) <= 1  # one replica away at a time
    assert final.on_virtual == set() and final.deployments == 0
    assert all(s.foreign for s in timeline.samples), "another writer's taint survived every flip"
    assert snapshot["tainted"] is True and snapshot["free_gpus"] == 10
    assert [f["direction"] for f in snapshot["recent_flips"]] == ["taint", "untaint", "taint"]
    evicted = [pod for _, pod in evictions]
    assert len(evicted) == len(set(evicted)) == 6  # each external replica evicted once, none local


async def test_partial_return_brings_home_exactly_what_fits_without_flapping(
    slow_cluster: Cluster, vnode: VirtualNode, kube: KubeClient, ns: str
) -> None:
    policy = return_home_policy(namespaces=[ns], per_node=2, per_namespace=2, total=4, min_pod_age="3s")
    timeline = Timeline(kube, ns, vnode)
    timeline.start()
    descheduler = await start_descheduler(slow_cluster, policy, interval_seconds=2)
    try:
        # both local nodes full: the 6 replicas run external
        await apply(kube, ns, blocker("block-a", 8))
        await apply(kube, ns, blocker("block-b", 8))
        await eventually(lambda: _blockers_running(kube, ns, 2), timeout=120)
        async with running_gate(kube, vnode.name) as gate:
            timeline.gate = gate
            for doc in inference(6):
                await apply(kube, ns, doc)
            await settle(kube, ns, vnode.name, local=0, external=6, timeout=120)
            assert gate.decider.tainted is False
            timeline.note("--- 6 external; freeing 3 local GPUs (block-b: 8 -> 5)")

            await kube.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/block-b")
            await apply(kube, ns, blocker("block-c", 5))
            await settle(kube, ns, vnode.name, local=3, external=3, timeout=300)
            settled = time.monotonic()
            timeline.note("--- 3 home, 3 external")
            # hold a while: nothing more moves and the gate stays put
            await eventually(lambda: _quiet_for(timeline, settled, 20), timeout=60, interval=1)
            assert await ready_where(kube, ns, vnode.name, local=3, external=3)
            directions = [f["direction"] for f in gate.flips]
        await stop_descheduler(slow_cluster, descheduler)
    finally:
        evictions = await timeline.finish(descheduler.log)
        print("\n" + "\n".join(timeline.lines))

    assert directions == ["taint", "untaint"], directions  # once in, once out: no flapping
    assert len(evictions) == 3  # exactly what fits came home; nothing was evicted to wait Pending
    assert not (await _tainted(kube, vnode.name, True))
    assert await cloud_deployments(vnode) == 3


async def _tainted(kube: KubeClient, node: str, want: bool) -> bool:
    return any(t.get("key") == GATE_TAINT for t in await node_taints(kube, node)) is want


async def _job_complete(kube: KubeClient, ns: str) -> bool:
    job = await kube.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/training")
    return int((job.get("status") or {}).get("succeeded") or 0) >= 2


async def _no_deployments(vnode: VirtualNode) -> bool:
    return await cloud_deployments(vnode) == 0


async def _blockers_running(kube: KubeClient, ns: str, count: int) -> bool:
    running = 0
    for app in ("block-a", "block-b", "block-c"):
        running += sum(1 for p in await pods(kube, ns, app) if p["status"].get("phase") == "Running")
    return running == count


async def _quiet_for(timeline: Timeline, since: float, seconds: float) -> bool:
    return time.monotonic() - since >= seconds
