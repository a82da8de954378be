"""Requests while replicas move, over the real data path (kube-proxy in nftables mode, the local
pods' listeners, fakecloud serving its deployments): a deleted external replica finishes the slow
requests it holds before its deployment stops, and a steady load sees no failed request while
local replicas are preempted out to the virtual node and while they come home by eviction.

Order comes from the systems' own records (each answer's arrival and fakecloud's ledger, on this
host's clock), never from measuring how long anything took."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.integration import datapath_support
from tests.integration.datapath_support import JSON, external, ready_pods, setup
from tests.support import edit_node_taints, eventually, ledger_entry
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.kwok import GPU_POOL_LABEL, GPU_POOL_VALUE, SERVE_THROUGH_GRACE_ANNOTATION
from vkprovider.devcluster.loadgen import LoadReport, run_load
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import get
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode

pytestmark = pytest.mark.cluster

dp_cluster, vnode, ns = datapath_support.dp_cluster, datapath_support.vnode, datapath_support.ns

#: Keeps replicas off the virtual node while the local GPUs are theirs (as the gate's taint does).
HOME_FIRST = {"key": "test.vkprovider.io/home-first", "value": "true", "effect": "NoSchedule"}
SLOW_MS = 3000
IN_FLIGHT = 6


async def test_a_deleted_external_replica_finishes_its_slow_requests_before_it_stops(
    dp_cluster: Cluster, vnode: VirtualNode, ns: str
) -> None:
    kube, path = vnode.kube, dp_cluster.datapath
    assert kube is not None and path is not None
    cluster_ip = await setup(kube, ns, external("away", vnode.name, 1, "routed", grace=10))
    (pod,) = await eventually(lambda: ready_pods(kube, ns, "away", 1))
    uid = pod["metadata"]["uid"]

    async def answering() -> LoadReport | None:
        report = await run_load(path.node, cluster_ip, 80, rate=10, duration=1)
        return report if report.answered_by and not report.failed else None

    await eventually(answering, timeout=90)
    node = NetnsSockets(path.node)
    finished: list[tuple[float, JSON]] = []

    async def slow() -> None:
        async with asyncio.timeout(60):
            answer = await get(await node.client(), cluster_ip, 80, f"/slow?ms={SLOW_MS}")
        finished.append((time.time(), answer))

    try:
        requests = [asyncio.create_task(slow()) for _ in range(IN_FLIGHT)]
        await asyncio.sleep(0.5)  # connected and sent: held by the replica for SLOW_MS
        assert not finished
        await kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")
        outcomes = await asyncio.gather(*requests, return_exceptions=True)
    finally:
        node.close()
    assert [o for o in outcomes if o is not None] == []  # none failed
    assert len(finished) == IN_FLIGHT
    assert {answer["pod_uid"] for _, answer in finished} == {uid}  # all held by the deleted replica

    async def ended() -> JSON | None:
        entry = await ledger_entry(vnode.clouds["routed"].url, uid)
        return entry if entry["ended_at"] is not None else None

    entry = await eventually(ended)
    assert entry["end_reason"] == "deleted"
    # fakecloud's ledger and the client share this host's clock: the stop came after every answer.
    assert entry["ended_at"] >= max(at for at, _ in finished)


def either_side(name: str, vnode: str, replicas: int, grace: int) -> JSON:
    """A Deployment whose replicas may run on the local GPU pool or on the virtual node, and whose
    local pods keep serving through their grace (a server with a preStop sleep)."""
    manifest = external(name, vnode, replicas, "routed", grace=grace)
    template = manifest["spec"]["template"]
    template["metadata"]["annotations"][SERVE_THROUGH_GRACE_ANNOTATION] = "true"
    spec = template["spec"]
    del spec["nodeSelector"]
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": GPU_POOL_LABEL, "operator": "In", "values": [GPU_POOL_VALUE]}
                        ]
                    },
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [vnode]}
                        ]
                    },
                ]
            }
        }
    }
    return manifest


async def set_taints(kube: KubeClient, node: str, home_first: bool) -> None:
    def edit(taints: list[JSON]) -> list[JSON]:
        kept = [t for t in taints if t["key"] != HOME_FIRST["key"]]
        return [*kept, HOME_FIRST] if home_first else kept

    await edit_node_taints(kube, node, edit)


async def cordon(kube: KubeClient, nodes: list[str], unschedulable: bool) -> None:
    for node in nodes:
        await kube.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"spec": {"unschedulable": unschedulable}},
            content_type="application/merge-patch+json",
        )


async def placed(kube: KubeClient, ns: str, vnode: str, count: int, *, away: bool) -> list[JSON] | None:
    """Exactly ``count`` pods, all Ready and on the side asked for (none left terminating)."""
    body = await kube.request("GET", f"/api/v1/namespaces/{ns}/pods", query={"labelSelector": "side=web"})
    pods: list[JSON] = body["items"]
    ready = await ready_pods(kube, ns, "web", count)
    if len(pods) != count or ready is None:
        return None
    return ready if all((p["spec"].get("nodeName") == vnode) is away for p in pods) else None


@contextlib.asynccontextmanager
async def steady_load(node: str, cluster_ip: str) -> AsyncIterator[LoadReport]:
    """50 req/s to the Service until the block ends (then the requests in flight finish)."""
    report, stop = LoadReport(), asyncio.Event()
    task = asyncio.create_task(
        run_load(node, cluster_ip, 80, rate=50, duration=600, report=report, stop=stop)
    )
    try:
        yield report
    finally:
        stop.set()
        await task


async def answered_from(report: LoadReport, since: float, where: str) -> bool:
    """At least 50 answers (a second's load) from ``where`` to requests started after ``since``."""
    return sum(1 for r in report.records if r.t >= since and r.answerer.startswith(f"{where}/")) >= 50


async def test_no_request_fails_while_local_replicas_are_preempted_out_and_come_home(
    dp_cluster: Cluster, vnode: VirtualNode, ns: str
) -> None:
    kube, path = vnode.kube, dp_cluster.datapath
    assert kube is not None and path is not None
    nodes = await kube.request(
        "GET", "/api/v1/nodes", query={"labelSelector": f"{GPU_POOL_LABEL}={GPU_POOL_VALUE}"}
    )
    local_nodes = [n["metadata"]["name"] for n in nodes["items"]]
    assert local_nodes
    await set_taints(kube, vnode.name, home_first=True)
    try:
        cluster_ip = await setup(kube, ns, either_side("web", vnode.name, 2, grace=10))
        home = await eventually(lambda: placed(kube, ns, vnode.name, 2, away=False))

        async def both_answer() -> LoadReport | None:
            report = await run_load(path.node, cluster_ip, 80, rate=20, duration=1)
            return report if len(report.answered_by) == 2 and not report.failed else None

        await eventually(both_answer, timeout=90)
        t0 = time.time()
        marks: dict[str, float] = {}
        async with steady_load(path.node, cluster_ip) as report:
            # Training takes the local GPUs: the replicas are preempted (deleted with their grace)
            # and their replacements can only go out to the virtual node.
            await cordon(kube, local_nodes, True)
            await set_taints(kube, vnode.name, home_first=False)
            for pod in home:
                await kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")
            marks["deleted"] = time.time() - t0
            away = await eventually(lambda: placed(kube, ns, vnode.name, 2, away=True), timeout=90)
            out = time.time()
            marks["out"] = out - t0
            await eventually(lambda: answered_from(report, out, "routed"), timeout=60)
            # Training ends: the external replicas are evicted (as the Descheduler does) and their
            # replacements land on the local GPUs again.
            await set_taints(kube, vnode.name, home_first=True)
            await cordon(kube, local_nodes, False)
            for pod in away:
                name = pod["metadata"]["name"]
                eviction = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": ns},
                }
                await kube.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body=eviction)
            marks["evicted"] = time.time() - t0
            await eventually(lambda: placed(kube, ns, vnode.name, 2, away=False), timeout=90)
            back = time.time()
            marks["back"] = back - t0
            await eventually(lambda: answered_from(report, back, "local"), timeout=60)
        failures = [(round(r.t - t0, 2), r.error) for r in report.records if r.failed]
        assert report.failed == 0, (report.to_json(), marks, failures[:5], failures[-5:])
        assert report.by_where().keys() == {"local", "routed"}
        ended = [await ledger_entry(vnode.clouds["routed"].url, p["metadata"]["uid"]) for p in away]
        assert all(e["ended_at"] is not None and e["end_reason"] == "deleted" for e in ended), ended
    finally:
        await cordon(kube, local_nodes, False)
        await set_taints(kube, vnode.name, home_first=False)
