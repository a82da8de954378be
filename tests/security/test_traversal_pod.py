"""Attack: a pod reads another namespace's Secret through a traversal name (issue 21, item 1).

On the dev cluster, through the real pod path (informer → translation → ApiObjectSource →
KubeClient → apiserver): a pod in the test namespace names
``../../kube-system/secrets/<victim>`` as a secret volume, and as an image pull secret. The
apiserver accepts both pods (it only checks the names are non-empty). Every request the service
sends is recorded; none may touch a Secret or ConfigMap outside the pod's namespace, and the
victim's value must never reach the cloud. The volume pod fails naming the field; the pull-secret
pod runs without it, with the kubelet's Warning.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
VICTIM_PASSWORD = "victim-registry-password-Wq3"


class Recorded:
    """Every (method, path) the service's client sends, recorded in front of the real client."""

    def __init__(self, kube: KubeClient) -> None:
        self.paths: list[tuple[str, str]] = []
        self._request = kube.request
        kube.request = self.request  # type: ignore[method-assign]

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.paths.append((method, path))
        return await self._request(method, path, **kwargs)

    def reads_outside(self, namespace: str) -> list[str]:
        """Secret/ConfigMap paths that, as the apiserver resolves them, leave ``namespace``."""
        inside = f"/api/v1/namespaces/{namespace}/"
        return [
            path
            for _, path in self.paths
            if ("/secrets" in path or "/configmaps" in path)
            and not posixpath.normpath(path).startswith(inside)
        ]


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(cluster, {"cheap": cloud_config("cheap", 1.0, capacity=4)})
    yield node
    await node.stop()


@pytest.fixture
async def victim(vnode: VirtualNode) -> AsyncIterator[str]:
    """A pull secret in kube-system holding a value no pod of the test namespace may obtain."""
    kube = vnode.kube
    assert kube is not None
    name = f"victim-{uuid.uuid4().hex[:8]}"
    docker = {"auths": {"registry.example": {"username": "admin", "password": VICTIM_PASSWORD}}}
    body = {
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": json.dumps(docker)},
    }
    await kube.request("POST", "/api/v1/namespaces/kube-system/secrets", body=body)
    yield name
    await kube.request("DELETE", f"/api/v1/namespaces/kube-system/secrets/{name}", decode=False)


def attacker_pod(name: str, node: str, **spec: Any) -> JSON:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.example/llm-server:1.0",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            **spec,
        },
    }


async def pod_events(kube: KubeClient, namespace: str, name: str, reason: str) -> list[JSON]:
    async def present() -> list[JSON] | None:
        body = await kube.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/events",
            query={"fieldSelector": f"involvedObject.name={name}"},
        )
        found = [e for e in body["items"] if e["reason"] == reason]
        return found or None

    found: list[JSON] = await eventually(present)
    return found


async def test_a_traversal_secret_volume_fails_the_pod_and_reads_nothing_outside(
    vnode: VirtualNode, namespace: str, victim: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    recorded = Recorded(kube)
    traversal = f"../../kube-system/secrets/{victim}"
    manifest = attacker_pod(
        "steal-volume",
        vnode.name,
        volumes=[{"name": "loot", "secret": {"secretName": traversal}}],
    )
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "loot", "mountPath": "/loot"}]
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=manifest)

    async def failed() -> JSON | None:
        pod: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/steal-volume")
        return pod if (pod.get("status") or {}).get("phase") == "Failed" else None

    pod = await eventually(failed)
    assert pod["status"]["reason"] == "InvalidPodSpec"
    assert pod["status"]["message"].startswith("spec.volumes[0].secret.secretName: ")
    events = await pod_events(kube, namespace, "steal-volume", "InvalidPodSpec")
    assert events[0]["type"] == "Warning"
    assert recorded.reads_outside(namespace) == []
    assert not vnode.clouds["cheap"].store.deployments  # nothing was deployed


async def test_a_traversal_pull_secret_is_skipped_and_reads_nothing_outside(
    vnode: VirtualNode, namespace: str, victim: str
) -> None:
    kube = vnode.kube
    assert kube is not None
    recorded = Recorded(kube)
    manifest = attacker_pod(
        "steal-pull", vnode.name, imagePullSecrets=[{"name": f"../../kube-system/secrets/{victim}"}]
    )
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=manifest)
    events = await pod_events(kube, namespace, "steal-pull", "FailedToRetrieveImagePullSecret")
    assert events[0]["type"] == "Warning"
    assert "spec.imagePullSecrets[0].name" in events[0]["message"]

    async def deployed() -> Any:
        return list(vnode.clouds["cheap"].store.deployments.values())

    (deployment,) = await eventually(deployed)
    assert deployment.request.registry_credentials == []  # runs without it, as the kubelet does
    assert VICTIM_PASSWORD not in deployment.request.model_dump_json()
    assert recorded.reads_outside(namespace) == []
