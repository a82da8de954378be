"""Restart resync, environment resolution, and secrets staying out of logs and Events."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.test_pod_lifecycle import (
    all_cloud_uids,
    create_deployment,
    events_for,
    events_with,
    is_ready,
    pods_of,
)
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.sim.local import (
    VirtualNode,
    cloud_config,
    inference_deployment,
    start_virtual_node,
)

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
SECRET_VALUE = "s3cr3t-hunter2-do-not-log"


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(cluster, {"cheap": cloud_config("cheap", 1.0, capacity=10)})
    yield node
    await node.stop()


async def test_sigkill_and_restart_keeps_one_deployment_per_pod(vnode: VirtualNode, namespace: str) -> None:
    kube = vnode.kube
    assert kube is not None
    await create_deployment(kube, namespace, inference_deployment("resync", vnode.name, replicas=3))

    async def three_ready() -> list[JSON] | None:
        pods = [p for p in await pods_of(kube, namespace, "resync") if is_ready(p)]
        return pods if len(pods) == 3 else None

    before = await eventually(three_ready)
    creates_before = vnode.clouds["cheap"].store.requests.get("POST /v1/deployments", 0)
    await vnode.crash()

    # While the service is down: a pod is force-deleted (its deployment keeps billing) and
    # the ReplicaSet creates a replacement that nobody has deployed yet.
    victim = before[0]
    await kube_admin_delete(vnode, namespace, victim["metadata"]["name"])
    await vnode.start()

    async def converged() -> bool:
        pods = [
            p
            for p in await pods_of(vnode.kube, namespace, "resync")
            if not p["metadata"].get("deletionTimestamp")
        ]  # type: ignore[arg-type]
        live = {p["metadata"]["uid"] for p in pods}
        ready = sum(is_ready(p) for p in pods)
        return len(pods) == 3 and ready == 3 and await all_cloud_uids(vnode) == live

    await eventually(converged)
    survivors = {p["metadata"]["uid"] for p in before[1:]}
    assert survivors <= await all_cloud_uids(vnode)
    assert victim["metadata"]["uid"] not in await all_cloud_uids(vnode)
    # Only the replacement was deployed after the restart: survivors were adopted, not redeployed.
    creates_after = vnode.clouds["cheap"].store.requests.get("POST /v1/deployments", 0)
    assert creates_after - creates_before == 1
    # Adoption restored the placement state of the survivors: placements, budget, spread.
    assert vnode.controller is not None
    placer = vnode.controller.sync.placer
    live = {p["metadata"]["uid"] for p in await pods_of(vnode.kube, namespace, "resync")}  # type: ignore[arg-type]
    assert all(placer.placed(uid) is not None for uid in live)
    assert placer.budgets.spent(namespace) == pytest.approx(3 * 1.0)  # three pods at 1.0/h


async def kube_admin_delete(vnode: VirtualNode, namespace: str, name: str) -> None:
    from vkprovider.kube.client import KubeClient

    kube = await KubeClient.connect(str(vnode.cluster.kubeconfig))
    try:
        await kube.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": 0}
        )
    finally:
        await kube.close()


async def test_env_is_resolved_and_secrets_stay_out_of_logs_and_events(
    vnode: VirtualNode, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    kube = vnode.kube
    assert kube is not None
    caplog.set_level(logging.DEBUG)
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={"metadata": {"name": "model"}, "data": {"MODEL_NAME": "llama-3-70b", "BATCH": "8"}},
    )
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        body={"metadata": {"name": "hf"}, "stringData": {"token": SECRET_VALUE}},
    )
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/services",
        body={"metadata": {"name": "model-api"}, "spec": {"ports": [{"port": 8080}]}},
    )

    async def service_seen() -> bool:  # the service-links cache is an informer: eventually consistent
        assert vnode.controller is not None
        return f"{namespace}/model-api" in vnode.controller.services.cache

    await eventually(service_seen)
    env = [
        {"name": "MODEL", "valueFrom": {"configMapKeyRef": {"name": "model", "key": "MODEL_NAME"}}},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "GREETING", "value": "serving $(MODEL)"},
    ]
    manifest = inference_deployment("envy", vnode.name, replicas=1, env=env)
    manifest["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "model"}}]
    await create_deployment(kube, namespace, manifest)

    async def running() -> JSON | None:
        pods = [p for p in await pods_of(kube, namespace, "envy") if p["status"].get("phase") == "Running"]
        return pods[0] if pods else None

    pod = await eventually(running)
    deployment = vnode.clouds["cheap"].store.deployments[pod["metadata"]["uid"]]
    values = {e.name: e for e in deployment.request.containers[0].env}
    assert values["MODEL"].value == "llama-3-70b"
    assert values["BATCH"].value == "8"
    assert values["HF_TOKEN"].value == SECRET_VALUE and values["HF_TOKEN"].secret
    assert values["POD_NAME"].value == pod["metadata"]["name"]
    assert values["GREETING"].value == "serving llama-3-70b"
    assert values["MODEL_API_SERVICE_PORT"].value == "8080"  # service links, from the informer
    assert values["MODEL_API_SERVICE_HOST"].value

    events = await events_with(kube, namespace, pod["metadata"]["name"], "ProviderCreateSuccess")
    assert all(SECRET_VALUE not in e["message"] for e in events)
    assert SECRET_VALUE not in caplog.text
    assert SECRET_VALUE not in repr(deployment.request)


async def test_missing_mandatory_secret_waits_pending_and_starts_once_it_exists(
    vnode: VirtualNode, namespace: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    env = [{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}}]
    await create_deployment(kube, namespace, inference_deployment("norefs", vnode.name, replicas=1, env=env))

    async def waiting() -> JSON | None:
        for pod in await pods_of(kube, namespace, "norefs"):
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            state = statuses[0]["state"] if statuses else {}
            if state.get("waiting", {}).get("reason") == "CreateContainerConfigError":
                return pod
        return None

    # Like the kubelet: Pending, the container waiting with the ref named, a Warning Event.
    pod = await eventually(waiting)
    assert pod["status"]["phase"] == "Pending"
    assert "db-creds" in pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]

    async def warned() -> list[JSON] | None:
        found = [
            e for e in await events_for(kube, namespace, name) if e["reason"] == "MandatorySecretNotFound"
        ]
        return found or None

    (warning,) = await eventually(warned)
    assert warning["type"] == "Warning" and "db-creds" in warning["message"]
    assert uid not in await all_cloud_uids(vnode)  # nothing deployed half-way
    assert len(await pods_of(kube, namespace, "norefs")) == 1  # no stream of Failed replacements

    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        body={"metadata": {"name": "db-creds"}, "stringData": {"password": SECRET_VALUE}},
    )

    async def running() -> JSON | None:
        pods = [p for p in await pods_of(kube, namespace, "norefs") if p["status"].get("phase") == "Running"]
        return pods[0] if pods else None

    started = await eventually(running, timeout=120)  # the retry backoff may have grown meanwhile
    assert started["metadata"]["uid"] == uid  # the same pod, not a replacement
    assert uid in await all_cloud_uids(vnode)
