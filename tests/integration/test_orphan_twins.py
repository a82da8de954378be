"""A UID deployed on a provider that is not its pod's placement (an ambiguous create that
succeeded after placement moved on) is an orphan: the orphan pass deletes that twin and keeps
the deployment the pod is placed on (real apiserver, two real fakecloud servers)."""

from __future__ import annotations

import pytest

from tests.integration.test_pod_lifecycle import create_deployment, pods_of
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import JSON
from vkprovider.models import Container, DeploymentRequest
from vkprovider.pods.sync import ANNOTATION_PROVIDER
from vkprovider.sim.local import cloud_config, inference_deployment, start_virtual_node

pytestmark = pytest.mark.cluster


async def test_a_twin_on_another_provider_is_deleted_and_the_placed_one_kept(
    cluster: Cluster, namespace: str
) -> None:
    node = await start_virtual_node(
        cluster,
        {"cheap": cloud_config("cheap", 1.0), "premium": cloud_config("premium", 3.0)},
        orphan_gc_seconds=0.5,
    )
    try:
        kube = node.kube
        assert kube is not None and node.controller is not None
        await create_deployment(kube, namespace, inference_deployment("twinned", node.name, replicas=1))

        async def running_pod() -> JSON | None:
            pods = [
                p for p in await pods_of(kube, namespace, "twinned") if p["status"].get("phase") == "Running"
            ]
            return pods[0] if pods else None

        pod = await eventually(running_pod)
        uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
        assert pod["metadata"]["annotations"][ANNOTATION_PROVIDER] == "cheap"
        cheap, premium = node.clouds["cheap"].store.deployments, node.clouds["premium"].store.deployments
        assert uid in cheap

        # What a create that timed out on premium leaves behind when it succeeded after all.
        twin = DeploymentRequest(
            uid=uid,
            namespace=namespace,
            name=name,
            node_name=node.name,
            containers=[Container(name="server", image="registry.example/llm-server:1.0")],
            gpu_type="H100-SXM-80GB",
            gpu_count=1,
            offer_id="premium-h100",
        )
        await node.providers["premium"].deploy(twin)
        assert uid in premium

        async def twin_deleted() -> bool:
            return uid not in premium

        await eventually(twin_deleted, timeout=60)
        assert uid in cheap  # the deployment the pod is placed on is kept
        assert node.controller.orphans_deleted >= 1
        current = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        assert current["metadata"]["uid"] == uid and current["status"]["phase"] == "Running"
    finally:
        await node.stop()
