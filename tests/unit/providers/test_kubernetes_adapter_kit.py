"""The remote-Kubernetes adapter on the adapter kit, over an in-memory remote cluster.

The cluster-backed test (tests/integration/test_kubernetes_adapter.py) checks the adapter against
a real API server; this one checks, without a cluster, what the kit now does for it: the pod name
is the id (no search), deploy finds before it creates and takes a 409 as the idempotent path,
delete tolerates a pod already gone and removes its Secret and Service, unknown UIDs and pods of
another UID are NotFound, and the kit's logs and endpoints reach the remote pod.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from kubeconfig_stub import KUBECONFIG
from vkprovider_kubernetes.adapter import KubernetesProvider
from vkprovider_kubernetes.client import AlreadyExists
from vkprovider_kubernetes.manifest import pod_name

from vkprovider.plugins.api import (
    LABEL_POD_UID,
    Container,
    DeploymentRequest,
    LogOptions,
    NotFound,
    Phase,
    Port,
    SupportsEndpoints,
    SupportsLogs,
)

NODE = "vk-remote"
NS = "vk-pods"


class FakeCluster:
    """Pods, Secrets and Services by (kind, name) in one namespace; records every call."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []
        self.create_gate: asyncio.Event | None = None

    async def ensure_namespace(self, namespace: str) -> None:
        self.calls.append(f"namespace {namespace}")

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create pod")
        if self.create_gate is not None:
            await self.create_gate.wait()
        key = ("pod", pod["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists(key[1])
        stored = {**copy.deepcopy(pod), "status": {"phase": "Pending"}}
        stored["metadata"].update(namespace=namespace, uid=f"k8s-{len(self.objects)}")
        self.objects[key] = stored
        return copy.deepcopy(stored)

    async def create_secret(self, namespace: str, secret: dict[str, Any]) -> None:
        self.objects[("secret", secret["metadata"]["name"])] = secret

    async def create_service(self, namespace: str, service: dict[str, Any]) -> dict[str, Any]:
        self.objects[("service", service["metadata"]["name"])] = service
        return service

    async def read_pod(self, namespace: str, name: str) -> Any:
        self.calls.append(f"read {name}")
        if ("pod", name) not in self.objects:
            raise NotFound(f"pod {name}", provider="remote")
        return copy.deepcopy(self.objects[("pod", name)])

    async def read_service(self, namespace: str, name: str) -> Any:
        if ("service", name) not in self.objects:
            raise NotFound(f"service {name}", provider="remote")
        return self.objects[("service", name)]

    async def list_pods(
        self, namespace: str, label_selector: str = "", limit: int | None = None
    ) -> list[Any]:
        self.calls.append(f"list {label_selector}")
        return [copy.deepcopy(o) for (kind, _), o in self.objects.items() if kind == "pod"]

    async def delete(
        self, kind: str, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        self.calls.append(f"delete {kind} {name} grace={grace_period_seconds}")
        self.objects.pop((kind, name), None)

    async def stream_log(
        self, namespace: str, name: str, params: dict[str, Any]
    ) -> AsyncGenerator[bytes, None]:
        self.calls.append(f"log {name} {sorted(params)}")
        for _ in range(100):
            yield b"line\n"

    async def close(self) -> None: ...


def request_for(uid: str, node: str = NODE) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="serving",
        name="llm-0",
        node_name=node,
        containers=[
            Container(name="server", image="registry.example/llm:1", ports=[Port(container_port=8000)])
        ],
    )


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


async def over(cluster: FakeCluster, tmp_path: Path) -> KubernetesProvider:
    """An adapter whose remote cluster is ``cluster`` (the kubeconfig is never used)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    settings = KubernetesProvider.Settings(
        kubeconfig=kubeconfig, namespace=NS, expose="NodePort", node_addresses=["203.0.113.9"]
    )
    adapter = KubernetesProvider("remote", settings)
    await adapter._cluster.close()
    adapter._cluster = cluster  # type: ignore[assignment]
    return adapter


@pytest.fixture
async def provider(cluster: FakeCluster, tmp_path: Path) -> KubernetesProvider:
    return await over(cluster, tmp_path)


async def test_deploy_creates_one_pod_named_after_the_uid_and_finds_it_again(
    provider: KubernetesProvider, cluster: FakeCluster
) -> None:
    first = await provider.deploy(request_for("u-1"))
    assert [c for c in cluster.calls if c.startswith(("read", "list", "create pod"))] == [
        "create pod"
    ]  # no look-up
    results = await asyncio.gather(*(provider.deploy(request_for("u-1")) for _ in range(4)))
    assert len([k for k in cluster.objects if k[0] == "pod"]) == 1  # repeats answered AlreadyExists
    assert {r.provider_id for r in [first, *results]} == {f"{NS}/{pod_name('u-1')}"}
    assert ("service", pod_name("u-1")) in cluster.objects  # exposed at once
    assert not [c for c in cluster.calls if c.startswith("list")]  # the name is the id: no search


async def test_a_409_on_create_is_the_idempotent_path(
    provider: KubernetesProvider, cluster: FakeCluster, tmp_path: Path
) -> None:
    cluster.create_gate = asyncio.Event()
    first = asyncio.create_task(provider.deploy(request_for("u-1")))
    await asyncio.sleep(0)
    other = await over(cluster, tmp_path)  # another replica: its create gets AlreadyExists
    second = asyncio.create_task(other.deploy(request_for("u-1")))
    while cluster.calls.count("create pod") < 2:  # both found nothing and are creating
        await asyncio.sleep(0)
    cluster.create_gate.set()
    statuses = await asyncio.gather(first, second)
    assert statuses[0].provider_id == statuses[1].provider_id
    assert len([k for k in cluster.objects if k[0] == "pod"]) == 1


async def test_list_is_one_label_query_and_keeps_only_this_nodes_pods(
    provider: KubernetesProvider, cluster: FakeCluster
) -> None:
    await provider.deploy(request_for("u-1"))
    await provider.deploy(request_for("u-2", node="vk-elsewhere"))
    statuses = await provider.list(NODE)
    assert [s.uid for s in statuses] == ["u-1"] and statuses[0].phase is Phase.PENDING
    assert [c for c in cluster.calls if c.startswith("list")] == ["list vkprovider.io/node-name=vk-remote"]


async def test_unknown_uids_and_pods_of_another_uid_are_not_found(
    provider: KubernetesProvider, cluster: FakeCluster
) -> None:
    with pytest.raises(NotFound):
        await provider.get("nope")
    await provider.deploy(request_for("u-1"))
    cluster.objects[("pod", pod_name("u-1"))]["metadata"]["annotations"][LABEL_POD_UID] = "someone-else"
    with pytest.raises(NotFound):
        await provider.get("u-1")
    with pytest.raises(NotFound):
        await provider.endpoints("u-1")


async def test_delete_passes_the_grace_period_removes_secret_and_service_and_tolerates_gone(
    provider: KubernetesProvider, cluster: FakeCluster
) -> None:
    await provider.deploy(request_for("u-1"))
    await provider.delete("u-1", grace_period_seconds=2.5)
    name = pod_name("u-1")
    assert f"delete pod {name} grace=3" in cluster.calls
    assert f"delete secret {name} grace=None" in cluster.calls
    assert f"delete service {name} grace=None" in cluster.calls
    assert not cluster.objects
    await provider.delete("u-1")  # already gone
    await provider.delete("never-deployed")


async def test_logs_and_endpoints_reach_the_remote_pod(
    provider: KubernetesProvider, cluster: FakeCluster
) -> None:
    assert isinstance(provider, SupportsLogs) and isinstance(provider, SupportsEndpoints)
    await provider.deploy(request_for("u-1"))
    got = b"".join([c async for c in provider.logs("u-1", LogOptions(limit_bytes=12))])
    assert got == b"line\nline\nli"
    pod = cluster.objects[("pod", pod_name("u-1"))]
    pod["status"] = {"phase": "Running", "hostIP": "10.0.0.5"}
    service = cluster.objects[("service", pod_name("u-1"))]
    for port in service["spec"]["ports"]:
        port["nodePort"] = 31000
    found = await provider.endpoints("u-1")
    assert found.addresses == ["203.0.113.9"] and [p.port for p in found.ports] == [31000]
