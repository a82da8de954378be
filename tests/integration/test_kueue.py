"""Training through real Kueue on a real control plane, with the quota sync running.

One control plane of its own (three kwok local-GPU nodes x 8 GPUs, Kueue v0.17.0), because the
tests cordon, break and delete nodes. deploy/kueue is applied with ``kubectl apply -k``. The
timeline and the quota around each node event are printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.integration.kueue_support import NS, kueue_cluster, local_gpu_groups, submit_job, training_job
from tests.support import eventually
from tests.unit.deploy import rendering
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.audit import accesses, granted_rules, read_events, unused_rules
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.kwok import COMPLETE_DELAY_ANNOTATION
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.quota.config import QuotaConfig
from vkprovider.quota.plan import HOLD_ANNOTATION, QuotaTargetError
from vkprovider.quota.sync import QuotaSync

pytestmark = pytest.mark.cluster
SERVICE_ACCOUNT_USER = "system:serviceaccount:{}:{}".format(*rendering.SERVICE_ACCOUNT)

CQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
CQ = f"{CQ_PATH}/training"
GPUS_PER_POD = 4
SYNC_SECONDS = 2.0
JSON = dict[str, Any]


class Timeline:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def mark(self, what: str) -> None:
        print(f"[kueue timeline] t={time.monotonic() - self.start:6.1f}s  {what}", file=sys.stderr)


@pytest.fixture(scope="module")
async def kcluster() -> AsyncIterator[Cluster]:
    async with kueue_cluster(
        f"kueue-{os.getpid()}", gpu_nodes=3, audit_users=(SERVICE_ACCOUNT_USER,)
    ) as started:
        yield started


@pytest.fixture(scope="module")
async def client(kcluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    async with kcluster.http() as http:
        yield http


@pytest.fixture(scope="module")
async def sync(kcluster: Cluster) -> AsyncIterator[QuotaSync]:
    kube = await KubeClient.connect(str(kcluster.kubeconfig))
    recorder = EventRecorder(kube, component="vkprovider-quota", host="test")
    quota = QuotaSync(kube, QuotaConfig(cluster_queue="training", interval_seconds=SYNC_SECONDS), recorder)
    task = asyncio.create_task(quota.run())
    try:
        yield quota
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()


@pytest.fixture(autouse=True)
async def _jobs_removed_after_each_test(client: httpx.AsyncClient) -> AsyncIterator[None]:
    """The tests share the cluster: a test that fails mid-way must not leave its training running
    (it would hold quota and GPUs, and every later test would fail for it)."""
    yield
    await client.request(
        "DELETE",
        f"/apis/batch/v1/namespaces/{NS}/jobs",
        params={"propagationPolicy": "Background"},
    )
    with contextlib.suppress(TimeoutError):
        await eventually(lambda: _no_pods(client), timeout=60)


async def _no_pods(client: httpx.AsyncClient) -> bool:
    items = (await client.get(f"/api/v1/namespaces/{NS}/pods")).json().get("items") or []
    return not items


# ---------------------------------------------------------------------------------- helpers


async def gpu_quota(client: httpx.AsyncClient) -> int:
    cq = (await client.get(CQ)).json()
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            if flavor["name"] == "local-gpu":
                for res in flavor["resources"]:
                    if res["name"] == "nvidia.com/gpu":
                        return int(res["nominalQuota"])
    raise AssertionError("no local-gpu GPU quota")


async def quota_is(client: httpx.AsyncClient, want: int) -> bool:
    return await gpu_quota(client) == want


async def submit(
    client: httpx.AsyncClient,
    prefix: str,
    pods: int,
    run_for: str | None = None,
    *,
    queue: str = "research",
    gpus: int = GPUS_PER_POD,
) -> str:
    annotations = {COMPLETE_DELAY_ANNOTATION: run_for} if run_for else {}
    job = training_job(
        prefix, pods, gpus, queue=queue, priority_class="training-high", indexed=True, annotations=annotations
    )
    return await submit_job(client, job)


async def job(client: httpx.AsyncClient, name: str) -> JSON:
    resp = await client.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")
    assert resp.status_code == 200, resp.text
    body: JSON = resp.json()
    return body


async def workload(client: httpx.AsyncClient, name: str) -> JSON | None:
    uid = (await job(client, name))["metadata"]["uid"]
    resp = await client.get(
        f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads",
        params={"labelSelector": f"kueue.x-k8s.io/job-uid={uid}"},
    )
    items = resp.json().get("items") or []
    return items[0] if items else None


def condition(obj: JSON | None, kind: str) -> JSON | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


async def admitted(client: httpx.AsyncClient, name: str) -> bool:
    cond = condition(await workload(client, name), "Admitted")
    return cond is not None and cond["status"] == "True"


async def pending_for_quota(client: httpx.AsyncClient, name: str) -> JSON | None:
    """The workload exists, has no quota reserved, and Kueue says why."""
    wl = await workload(client, name)
    cond = condition(wl, "QuotaReserved")
    if cond is not None and cond["status"] == "False":
        return cond
    return None


async def pods(client: httpx.AsyncClient, name: str) -> list[JSON]:
    resp = await client.get(f"/api/v1/namespaces/{NS}/pods", params={"labelSelector": f"job-name={name}"})
    items: list[JSON] = resp.json()["items"]
    return items


async def running(client: httpx.AsyncClient, name: str, count: int) -> bool:
    return sum(1 for p in await pods(client, name) if p["status"].get("phase") == "Running") == count


async def complete(client: httpx.AsyncClient, name: str) -> bool:
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (await job(client, name)).get("status", {}).get("conditions") or []
    )


async def finish_pods(client: httpx.AsyncClient, name: str) -> None:
    """Act as the kubelet: the training processes exit 0."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for pod in await pods(client, name):
        status = {
            "phase": "Succeeded",
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}],
            "containerStatuses": [
                {
                    "name": "trainer",
                    "image": "trainer:test",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}},
                }
            ],
        }
        resp = await client.patch(
            f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/status",
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert resp.status_code == 200, resp.text


async def events(client: httpx.AsyncClient, reason: str) -> list[JSON]:
    resp = await client.get(
        "/api/v1/namespaces/default/events",
        params={"fieldSelector": f"involvedObject.name=training,reason={reason}"},
    )
    items: list[JSON] = resp.json()["items"]
    return items


async def patch_node(client: httpx.AsyncClient, name: str, patch: JSON, subresource: str = "") -> None:
    resp = await client.patch(
        f"/api/v1/nodes/{name}{subresource}",
        json=patch,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


# ---------------------------------------------------------------------------------- tests


async def test_sync_sets_quota_to_the_healthy_local_nodes(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    # The sync starts with the fixture, so it may already have written 24 by the time the test
    # reads: deploy/kueue's starting point (16) is proven by the Event's "from" value instead.
    await eventually(lambda: quota_is(client, 24), timeout=60)  # 3 kwok nodes x 8
    synced = await eventually(lambda: events(client, "QuotaSynced"))
    assert "nvidia.com/gpu 16->24" in synced[0]["message"]


async def test_two_jobs_over_quota_are_admitted_whole_one_after_the_other(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    await eventually(lambda: quota_is(client, 24), timeout=60)
    timeline = Timeline()
    first = await submit(client, "train-a", pods=4, run_for="1h")  # 16 GPUs
    timeline.mark(f"{first} submitted (4 pods x {GPUS_PER_POD} GPUs = 16; quota 24)")
    await eventually(lambda: admitted(client, first), timeout=90)
    timeline.mark(f"{first} admitted")
    await eventually(lambda: running(client, first, 4), timeout=90)
    timeline.mark(f"{first} 4/4 pods Running")

    second = await submit(client, "train-b", pods=3)  # 12 GPUs: 16 + 12 > 24
    timeline.mark(f"{second} submitted (3 pods x {GPUS_PER_POD} GPUs = 12)")
    why = await eventually(lambda: pending_for_quota(client, second), timeout=90)
    timeline.mark(f"{second} pending: {why.get('message', '')[:120]}")
    assert (await job(client, second))["spec"]["suspend"] is True
    assert await pods(client, second) == []
    assert await running(client, first, 4)

    await finish_pods(client, first)
    timeline.mark(f"{first} pods exit 0")
    await eventually(lambda: complete(client, first), timeout=90)
    timeline.mark(f"{first} Complete")
    await eventually(lambda: admitted(client, second), timeout=90)
    timeline.mark(f"{second} admitted")
    created = await eventually(lambda: pods(client, second), timeout=60)
    await eventually(lambda: complete(client, second), timeout=120)
    timeline.mark(f"{second} Complete ({len(created)} pods created at admission)")
    assert (await job(client, second))["status"].get("succeeded") == 3


async def test_cordon_lowers_quota_and_a_gang_that_no_longer_fits_stays_queued(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    node = kcluster.gpu_nodes[2]
    await eventually(lambda: quota_is(client, 24), timeout=60)
    before = await gpu_quota(client)
    await patch_node(client, node, {"spec": {"unschedulable": True}})
    await eventually(lambda: quota_is(client, 16), timeout=SYNC_SECONDS * 10)
    print(f"[kueue quota] cordon {node}: {before} -> {await gpu_quota(client)}", file=sys.stderr)
    synced = await eventually(
        lambda: _with(events(client, "QuotaSynced"), f"{node} left (cordoned)"), timeout=30
    )
    assert "nvidia.com/gpu 24->16" in synced

    gang = await submit(client, "train-c", pods=5)  # 20 GPUs: fits 24, not 16
    await eventually(lambda: pending_for_quota(client, gang), timeout=90)
    assert await pods(client, gang) == []

    await patch_node(client, node, {"spec": {"unschedulable": None}})
    await eventually(lambda: quota_is(client, 24), timeout=SYNC_SECONDS * 10)
    print(f"[kueue quota] uncordon {node}: 16 -> {await gpu_quota(client)}", file=sys.stderr)
    await eventually(lambda: admitted(client, gang), timeout=90)
    await eventually(lambda: complete(client, gang), timeout=120)


async def cluster_queue(client: httpx.AsyncClient, name: str = "training") -> JSON:
    body: JSON = (await client.get(f"{CQ_PATH}/{name}")).json()
    return body


def stop_policy(cq: JSON) -> str:
    return str(cq["spec"].get("stopPolicy") or "None")


def kueue_active(cq: JSON) -> JSON | None:
    """Kueue's own word on the queue: its ``Active`` condition."""
    return condition(cq, "Active")


async def held(client: httpx.AsyncClient, name: str = "training") -> JSON | None:
    """The queue under the sync's hold, as Kueue sees it: stopPolicy Hold, the sync's mark,
    and Kueue's Active=False/Stopped."""
    cq = await cluster_queue(client, name)
    active = kueue_active(cq)
    marked = HOLD_ANNOTATION in (cq["metadata"].get("annotations") or {})
    if stop_policy(cq) == "Hold" and marked and active and active["status"] == "False":
        return cq
    return None


async def released(client: httpx.AsyncClient, name: str = "training") -> JSON | None:
    cq = await cluster_queue(client, name)
    active = kueue_active(cq)
    marked = HOLD_ANNOTATION in (cq["metadata"].get("annotations") or {})
    if stop_policy(cq) == "None" and not marked and active and active["status"] == "True":
        return cq
    return None


async def test_a_lost_node_lowers_the_quota_below_use_and_holds_the_queue_until_usage_fits(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    """The quota is what the nodes offer, never what is used (Kueue does not evict when it drops
    below use); while use exceeds it the queue is held, and the hold ends when use fits."""
    await eventually(lambda: quota_is(client, 24), timeout=60)
    running_job = await submit(client, "train-d", pods=4, run_for="1h")  # 16 GPUs
    await eventually(lambda: running(client, running_job, 4), timeout=90)
    cordoned = kcluster.gpu_nodes[1:]
    try:
        for node in cordoned:
            await patch_node(client, node, {"spec": {"unschedulable": True}})
        await eventually(lambda: quota_is(client, 8), timeout=SYNC_SECONDS * 15)
        cq = await eventually(lambda: held(client), timeout=60)
        assert kueue_active(cq)["reason"] == "Stopped"  # type: ignore[index]
        message = await eventually(
            lambda: _with(events(client, "QuotaHold"), "its share 8), the healthy nodes offer 8"), timeout=30
        )
        # The figure is Kueue's ClusterQueue usage when the hold began, which Kueue updates in the
        # background: an earlier gang's release can still be in it on a loaded machine.
        used = re.search(r"admitted workloads use (\d+) \(this queue (\d+)", message)
        assert used and int(used[1]) >= 16 and used[1] == used[2], message
        assert await admitted(client, running_job) and await running(client, running_job, 4)  # runs on
        print(
            f"[kueue quota] cordon 2 of 3 under 16 GPUs of running training: 24 -> 8, {message}",
            file=sys.stderr,
        )

        await finish_pods(client, running_job)
        await eventually(lambda: complete(client, running_job), timeout=90)
        await eventually(lambda: released(client), timeout=60)
        assert await eventually(lambda: events(client, "QuotaReleased"), timeout=30)
        print("[kueue quota] training finished: hold lifted (stopPolicy None)", file=sys.stderr)
    finally:  # the later tests of this module share the nodes
        for node in cordoned:
            await patch_node(client, node, {"spec": {"unschedulable": None}})
    await eventually(lambda: quota_is(client, 24), timeout=60)


async def test_foreign_and_autoscaler_taints_take_a_node_out_of_the_quota(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    await eventually(lambda: quota_is(client, 24), timeout=60)
    node = kcluster.gpu_nodes[2]
    for taint, why in (
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, "untolerated taint"),
        ({"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}, "autoscaler taint"),
        (
            {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"},
            "out-of-service",
        ),
    ):
        await patch_node(client, node, {"spec": {"taints": [taint]}})
        await eventually(lambda: quota_is(client, 16), timeout=SYNC_SECONDS * 15)
        assert await eventually(
            lambda why=why: _with(events(client, "QuotaSynced"), f"{node} left ({why}"), timeout=30
        )
        await patch_node(client, node, {"spec": {"taints": None}})
        await eventually(lambda: quota_is(client, 24), timeout=SYNC_SECONDS * 15)
        print(
            f"[kueue quota] taint {taint['key']}:{taint['effect']} on {node}: 24 -> 16 -> 24", file=sys.stderr
        )


COHORT = "borrow"


def cohort_queue(name: str) -> JSON:
    """A ClusterQueue of the cohort, sharing flavor local-gpu; cpu and memory are not synced here
    (ample by hand), the sync owns the GPUs."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": COHORT,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": local_gpu_groups(0, 1000, "10Ti"),
        },
    }


def usage(cq: JSON) -> tuple[int, int]:
    """(total, borrowed) GPUs of flavor local-gpu, as Kueue reports them."""
    for entry in (cq.get("status") or {}).get("flavorsUsage") or []:
        if entry["name"] == "local-gpu":
            for res in entry["resources"]:
                if res["name"] == "nvidia.com/gpu":
                    return int(res.get("total") or 0), int(res.get("borrowed") or 0)
    return 0, 0


def nominal(cq: JSON) -> int:
    return int(cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])


@pytest.fixture
async def cohort(client: httpx.AsyncClient) -> AsyncIterator[None]:
    """ClusterQueues cq-a and cq-b in one cohort sharing flavor local-gpu, with LocalQueues."""
    for name in ("cq-a", "cq-b"):
        resp = await client.post(CQ_PATH, json=cohort_queue(name))
        assert resp.status_code == 201, resp.text
        local = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": f"lq-{name[-1]}", "namespace": NS},
            "spec": {"clusterQueue": name},
        }
        resp = await client.post(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues", json=local)
        assert resp.status_code == 201, resp.text
    try:
        yield
    finally:
        await client.delete(
            f"/apis/batch/v1/namespaces/{NS}/jobs",
            params={"labelSelector": "cohort-test=1", "propagationPolicy": "Background"},
        )
        for name in ("cq-a", "cq-b"):
            await client.delete(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/lq-{name[-1]}")
            await client.delete(f"{CQ_PATH}/{name}")


async def label_job(client: httpx.AsyncClient, name: str) -> None:
    resp = await client.patch(
        f"/apis/batch/v1/namespaces/{NS}/jobs/{name}",
        json={"metadata": {"labels": {"cohort-test": "1"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


async def test_a_borrowing_queue_that_loses_a_node_is_lowered_held_and_released(
    kcluster: Cluster, client: httpx.AsyncClient, cohort: None
) -> None:
    """Issue 23: cq-a (share 2) and cq-b (share 1) split flavor local-gpu (3 nodes x 8 GPUs);
    cq-a runs a 24-GPU gang, 8 of them borrowed from idle cq-b. A node goes: cq-a's nominal is
    lowered (16 -> 11, never raised to the 24 it uses), cq-a is held while the flavor's usage
    (24) exceeds the offer (16), nothing new is admitted into the missing capacity (neither a
    new cq-a gang nor one of the lender cq-b), and the hold ends once usage fits."""
    config = QuotaConfig.model_validate(
        {
            "flavors": [
                {
                    "name": "local-gpu",
                    "node_selector": {"pool": "local-gpu"},
                    "resources": ["nvidia.com/gpu"],
                    "queues": [{"name": "cq-a", "share": 2}, {"name": "cq-b", "share": 1}],
                }
            ],
            "interval_seconds": SYNC_SECONDS,
        }
    )
    kube = await KubeClient.connect(str(kcluster.kubeconfig))
    quota = QuotaSync(kube, config, EventRecorder(kube, component="vkprovider-quota", host="test-cohort"))
    task = asyncio.create_task(quota.run())

    async def nominals(a: int, b: int) -> bool:
        return (
            nominal(await cluster_queue(client, "cq-a")),
            nominal(await cluster_queue(client, "cq-b")),
        ) == (a, b)

    node = kcluster.gpu_nodes[2]
    try:
        await eventually(lambda: nominals(16, 8), timeout=60)
        gang = await submit(client, "cohort-g1", pods=3, run_for="1h", queue="lq-a", gpus=8)
        await label_job(client, gang)
        await eventually(lambda: running(client, gang, 3), timeout=120)

        async def borrowing() -> tuple[int, int] | None:
            got = usage(await cluster_queue(client, "cq-a"))
            return got if got == (24, 8) else None

        before = await eventually(borrowing, timeout=60)  # Kueue: 24 used, 8 of them borrowed
        print(
            f"[kueue cohort] cq-a nominal 16, usage {before[0]} ({before[1]} borrowed); cq-b nominal 8",
            file=sys.stderr,
        )

        await patch_node(client, node, {"spec": {"unschedulable": True}})
        await eventually(lambda: nominals(11, 5), timeout=SYNC_SECONDS * 15)
        cq_a = await eventually(lambda: held(client, "cq-a"), timeout=60)
        total, borrowed = usage(cq_a)
        assert stop_policy(await cluster_queue(client, "cq-b")) == "None"  # the lender is not held
        message = await eventually(
            lambda: _events_with(client, "cq-a", "QuotaHold", "admitted workloads use 24"), timeout=30
        )
        assert "(this queue 24, its share 11), the healthy nodes offer 16" in message
        print(
            f"[kueue cohort] cordon {node}: cq-a nominal 16 -> {nominal(cq_a)} (usage {total}, "
            f"{borrowed} borrowed), stopPolicy {stop_policy(cq_a)}; cq-b nominal 8 -> 5, stopPolicy None",
            file=sys.stderr,
        )
        assert await running(client, gang, 3)  # Hold: admitted workloads run on

        lender = await submit(client, "cohort-b", pods=1, run_for="1h", queue="lq-b", gpus=4)
        borrower = await submit(client, "cohort-a", pods=1, run_for="1h", queue="lq-a", gpus=4)
        for name in (lender, borrower):
            await label_job(client, name)
        why_b = await eventually(lambda: pending_for_quota(client, lender), timeout=90)
        why_a = await eventually(lambda: pending_for_quota(client, borrower), timeout=90)
        assert "is inactive" in why_a["message"], why_a
        for name in (lender, borrower):
            assert (await job(client, name))["spec"]["suspend"] is True and await pods(client, name) == []
        print(f"[kueue cohort] new cq-b gang: {why_b['message'][:120]}", file=sys.stderr)
        print(f"[kueue cohort] new cq-a gang: {why_a['message'][:120]}", file=sys.stderr)

        await finish_pods(client, gang)
        await eventually(lambda: complete(client, gang), timeout=90)
        await eventually(lambda: released(client, "cq-a"), timeout=60)
        assert await eventually(lambda: _events_of(client, "cq-a", "QuotaReleased"), timeout=30)
        await eventually(lambda: admitted(client, lender), timeout=90)  # 4 of cq-b's 5
        await eventually(lambda: admitted(client, borrower), timeout=90)  # 4 of cq-a's 11
        print("[kueue cohort] gang finished: cq-a released; both queued gangs admitted", file=sys.stderr)

        await patch_node(client, node, {"spec": {"unschedulable": None}})
        await eventually(lambda: nominals(16, 8), timeout=SYNC_SECONDS * 15)
        for name in (lender, borrower):
            await finish_pods(client, name)
            await eventually(lambda name=name: complete(client, name), timeout=90)
    finally:
        await patch_node(client, node, {"spec": {"unschedulable": None}})
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()


async def test_hand_edits_are_overwritten_only_in_the_synced_field(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    await eventually(lambda: quota_is(client, 24), timeout=60)
    cq = (await client.get(CQ)).json()
    cq["spec"]["queueingStrategy"] = "StrictFIFO"
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for res in flavor["resources"]:
                if res["name"] == "nvidia.com/gpu":
                    res["nominalQuota"] = 100
    resp = await client.put(CQ, json=cq)
    assert resp.status_code == 200, resp.text
    message = await eventually(lambda: _with(events(client, "QuotaOverwritten"), "was 100"), timeout=30)
    assert "last synced 24" in message
    await eventually(lambda: quota_is(client, 24), timeout=30)
    assert (await client.get(CQ)).json()["spec"]["queueingStrategy"] == "StrictFIFO"


async def test_dry_run_computes_the_change_and_writes_nothing(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    await eventually(lambda: quota_is(client, 24), timeout=60)
    cq = (await client.get(CQ)).json()
    kube = await KubeClient.connect(str(kcluster.kubeconfig))
    recorder = EventRecorder(kube, component="vkprovider-quota", host="test-dry")
    reserve = {"nvidia.com/gpu": "10"}
    dry = QuotaSync(kube, QuotaConfig(cluster_queue="training", reserve=reserve, dry_run=True), recorder)
    task = asyncio.create_task(dry.run())
    try:

        async def planned() -> bool:
            return dry.rounds > 0

        await eventually(planned, timeout=60)
        assert dry.last_plans["training"].changes[("local-gpu", "nvidia.com/gpu")] == (
            Decimal(24),
            Decimal(14),
        )
        assert dry.writes == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
    assert (await client.get(CQ)).json()["spec"] == cq["spec"]


async def test_admitted_training_pods_preempt_inference_on_full_local_nodes(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    """Quota follows allocatable, not free GPUs: Kueue admits, the scheduler preempts inference."""
    await eventually(lambda: quota_is(client, 24), timeout=60)
    inference = []
    for i in range(6):  # 6 x 4 GPUs fill the three local nodes
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"infer-{i}", "namespace": NS, "labels": {"app": "inference"}},
            "spec": {
                "nodeSelector": {"pool": "local-gpu"},
                "containers": [
                    {
                        "name": "server",
                        "image": "server:test",
                        "resources": {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}},
                    }
                ],
            },
        }
        resp = await client.post(f"/api/v1/namespaces/{NS}/pods", json=pod)
        assert resp.status_code == 201, resp.text
        inference.append(pod["metadata"]["name"])

    async def inference_running() -> int:
        resp = await client.get(f"/api/v1/namespaces/{NS}/pods", params={"labelSelector": "app=inference"})
        return sum(1 for p in resp.json()["items"] if p["status"].get("phase") == "Running")

    await eventually(lambda: _at_least(inference_running(), 6), timeout=90)
    training = await submit(client, "train-e", pods=2, run_for="1h")  # 8 GPUs
    await eventually(lambda: admitted(client, training), timeout=90)
    await eventually(lambda: running(client, training, 2), timeout=120)
    assert await inference_running() <= 4  # two inference pods made room
    print(f"[kueue preemption] {training}: 2 pods Running after preempting inference", file=sys.stderr)
    await finish_pods(client, training)
    await eventually(lambda: complete(client, training), timeout=90)
    for name in inference:
        await client.delete(f"/api/v1/namespaces/{NS}/pods/{name}", params={"gracePeriodSeconds": 0})


async def _at_least(count: Any, want: int) -> bool:
    return bool(await count >= want)


async def test_deleted_and_not_ready_nodes_leave_the_quota(
    kcluster: Cluster, client: httpx.AsyncClient, sync: QuotaSync
) -> None:
    await eventually(lambda: quota_is(client, 24), timeout=60)
    gone, broken = kcluster.gpu_nodes[2], kcluster.gpu_nodes[1]
    resp = await client.delete(f"/api/v1/nodes/{gone}")
    assert resp.status_code == 200, resp.text
    await eventually(lambda: quota_is(client, 16), timeout=SYNC_SECONDS * 10)
    print(f"[kueue quota] delete {gone}: 24 -> 16", file=sys.stderr)
    assert await eventually(
        lambda: _with(events(client, "QuotaSynced"), f"{gone} left (deleted)"), timeout=30
    )

    # kwok stops heartbeating a node without its annotation; then its Ready goes False.
    await patch_node(client, broken, {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready_false = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastHeartbeatTime": now}
    await patch_node(client, broken, {"status": {"conditions": [ready_false]}}, "/status")
    await eventually(lambda: quota_is(client, 8), timeout=SYNC_SECONDS * 10)
    print(f"[kueue quota] Ready=False on {broken}: 16 -> 8", file=sys.stderr)


async def test_a_missing_queue_or_flavor_is_a_clear_error_and_writes_nothing(
    kcluster: Cluster, client: httpx.AsyncClient
) -> None:
    spec = (await client.get(CQ)).json()["spec"]
    kube = await KubeClient.connect(str(kcluster.kubeconfig))
    try:
        recorder = EventRecorder(kube, component="vkprovider-quota", host="test")
        for config, field in (
            (QuotaConfig(cluster_queue="nope"), "quota.cluster_queue"),
            (QuotaConfig(cluster_queue="training", flavor="spot"), "quota.flavor"),
        ):
            with pytest.raises(QuotaTargetError, match=field):
                await asyncio.wait_for(QuotaSync(kube, config, recorder).run(), timeout=60)
    finally:
        await kube.close()
    assert (await client.get(CQ)).json()["spec"] == spec  # nothing written

    config = kcluster.workdir / "quota-bad.yaml"
    config.write_text(f"kube:\n  kubeconfig: {kcluster.kubeconfig}\nquota:\n  cluster_queue: nope\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vkprovider",
        "quota",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 2
    assert "quota.cluster_queue: ClusterQueue 'nope' does not exist" in err.decode()


async def _with(found: Any, needle: str) -> str | None:
    for event in await found:
        if needle in event["message"]:
            return str(event["message"])
    return None


async def test_the_cli_replicas_are_leader_elected_and_the_successor_keeps_syncing(
    kcluster: Cluster, client: httpx.AsyncClient
) -> None:
    """Runs last: one healthy local node (8 GPUs) is left. A queue of its own, so the in-process
    sync of the other tests is not the one writing."""
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "training-2"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": local_gpu_groups(1, 1, "1Gi"),
        },
    }
    resp = await client.post(path, json=cq)
    assert resp.status_code == 201, resp.text
    config = kcluster.workdir / "quota-leader.yaml"
    config.write_text(
        f"kube:\n  kubeconfig: {kcluster.kubeconfig}\n"
        "leader_election:\n  enabled: true\n  namespace: default\n"
        "quota:\n  cluster_queue: training-2\n  interval_seconds: 2\n"
    )
    replicas = {}
    for identity in ("replica-a", "replica-b"):
        with (kcluster.workdir / "logs" / f"quota-{identity}.log").open("w") as log:
            replicas[identity] = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "vkprovider",
                "quota",
                "--config",
                str(config),
                env={**os.environ, "VKPROVIDER_LEADER_ELECTION__IDENTITY": identity},
                stdout=asyncio.subprocess.DEVNULL,
                stderr=log,
            )
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/vkprovider-quota-training-2"

    async def holder() -> str | None:
        resp = await client.get(lease_path)
        return resp.json()["spec"].get("holderIdentity") if resp.status_code == 200 else None

    async def gpus_of_training_2() -> int:
        body = (await client.get(f"{path}/training-2")).json()
        return int(body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])

    try:
        leader = await eventually(holder, timeout=60)
        assert leader in replicas
        await _or_show(
            eventually(lambda: _follows_nodes(client, gpus_of_training_2()), timeout=90),
            kcluster.workdir / "logs" / f"quota-{leader}.log",
        )
        replicas[leader].terminate()
        assert await asyncio.wait_for(replicas[leader].wait(), timeout=30) == 0
        successor = await eventually(lambda: _other(holder(), leader), timeout=60)
        print(f"[kueue leader] {leader} stopped, {successor} took over", file=sys.stderr)
        await _hand_edit(client, f"{path}/training-2", 3)
        await eventually(lambda: _follows_nodes(client, gpus_of_training_2()), timeout=90)
    finally:
        for proc in replicas.values():
            if proc.returncode is None:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), timeout=30)


async def _hand_edit(client: httpx.AsyncClient, url: str, gpus: int) -> None:
    """Set the first flavor's GPU quota by hand, like kubectl edit: again on a 409 (the sync or
    Kueue's status writes may move the resourceVersion in between)."""
    for _ in range(20):
        body = (await client.get(url)).json()
        body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = gpus
        resp = await client.put(url, json=body)
        if resp.status_code != 409:
            assert resp.status_code == 200, resp.text
            return
    raise AssertionError(f"{url}: 20 conflicts in a row")


async def _or_show(waiting: Any, log: Path) -> None:
    """Await ``waiting``; on a timeout fail with the subprocess's log tail and the node GPUs."""
    try:
        await waiting
    except TimeoutError:
        raise AssertionError(f"timed out; {log.name}:\n{log.read_text()[-3000:]}") from None


async def healthy_gpus(client: httpx.AsyncClient) -> int:
    """What the healthy local nodes offer right now (Ready, schedulable), read independently:
    on a loaded machine a kwok node may miss its heartbeat, and the sync follows that."""
    nodes = (await client.get("/api/v1/nodes", params={"labelSelector": "pool=local-gpu"})).json()["items"]
    total = 0
    for node in nodes:
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or []
        )
        if ready and not node["spec"].get("unschedulable") and not node["metadata"].get("deletionTimestamp"):
            total += int(node["status"]["allocatable"].get("nvidia.com/gpu", 0))
    return total


async def _follows_nodes(client: httpx.AsyncClient, value: Any) -> bool:
    got = await value
    return bool(got == await healthy_gpus(client) and got > 1)


async def _other(value: Any, not_this: str) -> str | None:
    got = await value
    return got if got and got != not_this else None


def _serve_config(
    kcluster: Cluster,
    node: str,
    quota: JSON,
    *,
    kubeconfig: Path | None = None,
    lease_namespace: str = "default",
) -> Path:
    """A ``vkprovider serve`` config with a ``quota:`` section (its one provider is not running:
    start-up does not wait for providers)."""

    path = kcluster.workdir / f"serve-{node}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "node": {"name": node},
                "kube": {"kubeconfig": str(kubeconfig or kcluster.kubeconfig)},
                "http": {"admin_port": free_port()},
                "providers": [
                    {
                        "name": "off",
                        "adapter": "fakecloud",
                        "settings": {"url": f"http://127.0.0.1:{free_port()}"},
                    }
                ],
                "leader_election": {"enabled": True, "namespace": lease_namespace, "identity": f"{node}-a"},
                "quota": quota,
            }
        )
    )
    return path


RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def quota_rbac(tmp: Path) -> list[JSON]:
    """The base plus deploy/components/kueue-quota, as ``kubectl kustomize`` renders them, keeping
    the RBAC objects (the Deployment's pods would only be kwok's stand-ins here)."""
    tmp.mkdir(exist_ok=True)
    component = rendering.DEPLOY / "components" / "kueue-quota"
    (tmp / "kustomization.yaml").write_text(rendering.with_component(component, tmp))
    return [d for d in rendering.objects(rendering.render(tmp)) if d["kind"] in RBAC_KINDS]


async def service_account_kubeconfig(kcluster: Cluster, client: httpx.AsyncClient, path: Path) -> Path:
    namespace, account = rendering.SERVICE_ACCOUNT
    resp = await client.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert resp.status_code == 201, resp.text
    cluster = {"server": kcluster.server, "certificate-authority": str(kcluster.ca_cert)}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": account, "user": {"token": resp.json()["status"]["token"]}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": account}}],
                "current-context": "c",
            }
        )
    )
    return path


async def test_serve_runs_the_sync_on_its_leader_as_the_service_account_and_refuses_a_missing_queue(
    kcluster: Cluster, client: httpx.AsyncClient
) -> None:
    """After the CLI test: one healthy local node (8 GPUs). ``vkprovider serve`` as the base's
    ServiceAccount with deploy/components/kueue-quota (and nothing else): the service's own Lease
    elects the sync, which writes the quota (full config form) and its Events; the audit log shows
    no refused request and every rule of the component used."""
    bad = _serve_config(kcluster, "vk-quota-bad", {"cluster_queue": "nope"})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "serve", "--config", str(bad), stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 2, err.decode()[-2000:]
    assert "quota.cluster_queue: ClusterQueue 'nope' does not exist" in err.decode()
    assert "Traceback" not in err.decode()

    rbac = quota_rbac(kcluster.workdir / "quota-rbac")
    manifest = kcluster.workdir / "quota-rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(rbac))
    kubectl = Toolchain.default().binary("kubectl")
    applied = await asyncio.to_thread(
        subprocess.run,
        [str(kubectl), f"--kubeconfig={kcluster.kubeconfig}", "apply", "--server-side", "-f", str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert applied.returncode == 0, applied.stderr
    kubeconfig = await service_account_kubeconfig(kcluster, client, kcluster.workdir / "sa.kubeconfig")

    cq = (await client.get(f"{CQ_PATH}/training-2")).json()
    cq = {
        "apiVersion": cq["apiVersion"],
        "kind": cq["kind"],
        "metadata": {"name": "training-3"},
        "spec": cq["spec"],
    }
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 1
    assert (await client.post(CQ_PATH, json=cq)).status_code == 201
    node = "vk-external"  # the name the base's RBAC grants
    flavor = {"name": "local-gpu", "node_selector": {"pool": "local-gpu"}, "queues": [{"name": "training-3"}]}
    namespace = rendering.SERVICE_ACCOUNT[0]
    config = _serve_config(
        kcluster,
        node,
        {"flavors": [flavor], "interval_seconds": 2},
        kubeconfig=kubeconfig,
        lease_namespace=namespace,
    )
    log_path = kcluster.workdir / "logs" / "serve-quota.log"
    with log_path.open("w") as log:
        serve = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vkprovider",
            "serve",
            "--config",
            str(config),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
            env={k: v for k, v in os.environ.items() if not k.startswith("VKPROVIDER_")},
        )

    async def gpus() -> int:
        return nominal(await cluster_queue(client, "training-3"))

    try:
        await _or_show(eventually(lambda: _follows_nodes(client, gpus()), timeout=90), log_path)
        lease = (
            await client.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/vkprovider-{node}")
        ).json()
        assert lease["spec"]["holderIdentity"] == f"{node}-a"
        synced = await eventually(
            lambda: _with(_events_of(client, "training-3", "QuotaSynced"), "nvidia.com/gpu 1->"), timeout=30
        )
        print(f"[kueue serve] quota sync inside serve, as the ServiceAccount: {synced}", file=sys.stderr)
    finally:
        serve.terminate()
        await asyncio.wait_for(serve.wait(), timeout=60)
        await client.delete(f"/api/v1/nodes/{node}")
        await client.delete(f"{CQ_PATH}/training-3")

    assert kcluster.audit_log is not None
    events = read_events(kcluster.audit_log)
    refused = accesses(events, SERVICE_ACCOUNT_USER, decision="forbid")
    assert not refused, f"the service was refused (RBAC insufficient): {sorted(refused)}"
    used = accesses(events, SERVICE_ACCOUNT_USER)
    component = [d for d in rbac if d["metadata"]["name"] == "vkprovider-kueue-quota"]
    unused = unused_rules(granted_rules(component), used)
    assert not unused, f"deploy/components/kueue-quota grants rules the sync never used: {sorted(unused)}"
    for_sync = sorted(
        {
            (a.verb, a.resource, a.namespace or "-")
            for a in used
            if a.resource in ("clusterqueues", "nodes", "events")
        }
    )
    print(f"[kueue serve] the ServiceAccount's requests for the sync: {for_sync}", file=sys.stderr)


async def _events_with(client: httpx.AsyncClient, queue: str, reason: str, needle: str) -> str | None:
    return await _with(_events_of(client, queue, reason), needle)


async def _events_of(client: httpx.AsyncClient, queue: str, reason: str) -> list[JSON]:
    resp = await client.get(
        "/api/v1/namespaces/default/events",
        params={"fieldSelector": f"involvedObject.name={queue},reason={reason}"},
    )
    items: list[JSON] = resp.json()["items"]
    return items
