"""The local control plane behaves like a real cluster: scheduling, ReplicaSets, preemption."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from tests.support import eventually
from vkprovider.devcluster import Cluster

pytestmark = pytest.mark.cluster


def gpu_container(name: str, gpus: int) -> client.V1Container:
    return client.V1Container(
        name=name,
        image="registry.example/inference:1",
        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": str(gpus)}),
    )


def deployment(name: str, replicas: int, gpus: int, priority_class: str | None = None) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[gpu_container("main", gpus)],
                    priority_class_name=priority_class,
                    node_selector={"pool": "local-gpu"},
                    termination_grace_period_seconds=0,
                ),
            ),
        ),
    )


async def test_deployment_pods_run_on_kwok_gpu_nodes(
    api: client.ApiClient, namespace: str, cluster: Cluster
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    await apps.create_namespaced_deployment(namespace, deployment("infer", replicas=3, gpus=1))

    async def three_running() -> bool:
        pods = (await core.list_namespaced_pod(namespace, label_selector="app=infer")).items
        running = [p for p in pods if p.status.phase == "Running"]
        return len(running) == 3

    await eventually(three_running)
    pods = (await core.list_namespaced_pod(namespace, label_selector="app=infer")).items
    assert {p.spec.node_name for p in pods} <= set(cluster.gpu_nodes)


async def test_scheduler_preempts_low_priority_and_replicaset_recreates(
    api: client.ApiClient, namespace: str, cluster: Cluster
) -> None:
    apps, core, sched = client.AppsV1Api(api), client.CoreV1Api(api), client.SchedulingV1Api(api)
    low, high = f"{namespace}-low", f"{namespace}-high"
    await sched.create_priority_class(
        client.V1PriorityClass(metadata=client.V1ObjectMeta(name=low), value=10)
    )
    await sched.create_priority_class(
        client.V1PriorityClass(metadata=client.V1ObjectMeta(name=high), value=1000)
    )
    try:
        # Pin to one node and fill all 8 of its GPUs with low-priority pods (2 GPUs each).
        node = cluster.gpu_nodes[0]
        filler = deployment("filler", replicas=4, gpus=2, priority_class=low)
        filler.spec.template.spec.node_selector = {"kubernetes.io/hostname": node}
        await apps.create_namespaced_deployment(namespace, filler)

        async def filler_running() -> bool:
            pods = (await core.list_namespaced_pod(namespace, label_selector="app=filler")).items
            return sum(p.status.phase == "Running" for p in pods) == 4

        await eventually(filler_running)
        before = {
            p.metadata.uid
            for p in (await core.list_namespaced_pod(namespace, label_selector="app=filler")).items
        }

        trainer = client.V1Pod(
            metadata=client.V1ObjectMeta(name="trainer", labels={"app": "trainer"}),
            spec=client.V1PodSpec(
                containers=[gpu_container("train", 2)],
                priority_class_name=high,
                node_selector={"kubernetes.io/hostname": node},
                termination_grace_period_seconds=0,
            ),
        )
        await core.create_namespaced_pod(namespace, trainer)

        async def trainer_running() -> bool:
            pod = await core.read_namespaced_pod("trainer", namespace)
            return pod.status.phase == "Running"

        await eventually(trainer_running, timeout=90)

        async def victim_replaced() -> bool:
            pods = (await core.list_namespaced_pod(namespace, label_selector="app=filler")).items
            live = [p for p in pods if p.metadata.deletion_timestamp is None]
            return len(live) == 4 and bool({p.metadata.uid for p in live} - before)

        await eventually(victim_replaced)
        pods = (await core.list_namespaced_pod(namespace, label_selector="app=filler")).items
        pending = [p for p in pods if p.metadata.uid not in before and p.metadata.deletion_timestamp is None]
        # The replacement cannot fit on the full node, so it waits: the trainer kept its GPUs.
        assert pending and all(p.status.phase == "Pending" for p in pending)
    finally:
        await sched.delete_priority_class(low)
        await sched.delete_priority_class(high)
