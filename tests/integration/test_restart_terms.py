"""State across terms against the real control plane and fakecloud (issue 22, defects 4 and 6).

A service restart (a new process: ``VirtualNode.crash`` + ``start``) inside a restartPolicy
restart window redeploys the pod instead of failing it ``ProviderLost``; a term that ends and
begins again in the same process (leadership lost and regained) does not keep the budget shares
of pods deleted in between.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from tests.integration.test_pod_lifecycle import cloud_deployments, create_deployment, is_ready, pods_of
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.placement.config import PlacementConfig
from vkprovider.sim.local import VirtualNode, cloud_config, inference_deployment, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


def restart_count(pod: JSON) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(c.get("restartCount") or 0) for c in statuses), default=0)


async def cloud_phase(vnode: VirtualNode, uid: str) -> str:
    """The phase fakecloud reports for ``uid`` ("" when it holds none)."""
    for deployment in await cloud_deployments(vnode, "cheap"):
        if deployment["uid"] == uid:
            return str(deployment["status"]["phase"])
    return ""


async def one_pod(vnode: VirtualNode, namespace: str, app: str) -> JSON | None:
    assert vnode.kube is not None
    pods = [
        p for p in await pods_of(vnode.kube, namespace, app) if not p["metadata"].get("deletionTimestamp")
    ]
    for pod in pods:
        assert pod["status"].get("phase") != "Failed", pod["status"]  # never ProviderLost
    return pods[0] if len(pods) == 1 else None


async def test_a_restart_inside_a_restart_window_redeploys_the_pod(cluster: Cluster, namespace: str) -> None:
    vnode = await start_virtual_node(cluster, {"cheap": cloud_config("cheap", 1.0, capacity=5)})
    try:
        assert vnode.kube is not None
        await create_deployment(vnode.kube, namespace, inference_deployment("win", vnode.name, replicas=1))

        async def running() -> JSON | None:
            pod = await one_pod(vnode, namespace, "win")
            return pod if pod is not None and is_ready(pod) else None

        uid = (await eventually(running))["metadata"]["uid"]
        sold_out = {"method": "POST", "path": "/v1/deployments", "status": 409, "message": "sold out"}
        async with httpx.AsyncClient(base_url=vnode.clouds["cheap"].url + "/admin") as admin:
            # The redeploy cannot happen yet: the restart window stays open.
            rule = (await admin.post("/rules", json=sold_out)).json()
            (await admin.post(f"/deployments/{uid}/finish", json={"exit_code": 1})).raise_for_status()

        async def in_window() -> bool:
            pod = await one_pod(vnode, namespace, "win")
            return pod is not None and restart_count(pod) == 1 and await cloud_phase(vnode, uid) != "Running"

        await eventually(in_window)  # restarted: the deployment deleted, no redeploy yet
        await vnode.crash()
        async with httpx.AsyncClient(base_url=vnode.clouds["cheap"].url + "/admin") as admin:
            (await admin.delete(f"/rules/{rule['id']}")).raise_for_status()
        await vnode.start()  # the new process

        async def redeployed() -> JSON | None:
            pod = await running()
            if pod is None or await cloud_phase(vnode, uid) != "Running":
                return None
            return pod

        pod = await eventually(redeployed)
        assert pod["metadata"]["uid"] == uid
        assert restart_count(pod) == 1
    finally:
        await vnode.stop()


async def test_a_regained_term_keeps_no_budget_of_pods_deleted_in_between(
    cluster: Cluster, namespace: str
) -> None:
    placement = PlacementConfig(offer_refresh_seconds=1.0, namespace_budgets={namespace: 1.0})
    vnode = await start_virtual_node(
        cluster, {"cheap": cloud_config("cheap", 1.0, capacity=5)}, placement=placement
    )
    try:
        kube = vnode.kube
        assert kube is not None and vnode.controller is not None
        await create_deployment(kube, namespace, inference_deployment("first", vnode.name, replicas=1))

        async def first_ready() -> JSON | None:
            pod = await one_pod(vnode, namespace, "first")
            return pod if pod is not None and is_ready(pod) else None

        uid = (await eventually(first_ready))["metadata"]["uid"]
        # Leadership lost: the term ends (the process, its Placer and providers stay).
        term = vnode._tasks[1]
        term.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await term
        # Meanwhile the other replica deletes the workload and its deployment.
        await kube.request("DELETE", f"/apis/apps/v1/namespaces/{namespace}/deployments/first")
        for pod in await pods_of(kube, namespace, "first"):
            path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}"
            await kube.request("DELETE", path, body={"gracePeriodSeconds": 0})
        async with httpx.AsyncClient(base_url=vnode.clouds["cheap"].url) as client:
            (await client.post(f"/admin/deployments/{uid}/lose")).raise_for_status()
        # Leadership regained: a new term in the same process.
        vnode._tasks[1] = asyncio.create_task(vnode.controller.run())
        await create_deployment(kube, namespace, inference_deployment("second", vnode.name, replicas=1))

        async def second_ready() -> JSON | None:
            pod = await one_pod(vnode, namespace, "second")
            return pod if pod is not None and is_ready(pod) else None

        await eventually(second_ready)  # not Pending BudgetExceeded where nothing runs
    finally:
        await vnode.stop()
