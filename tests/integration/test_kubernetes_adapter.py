"""The remote-Kubernetes adapter against a second real control plane (kwok GPU nodes).

A module-scoped cluster named ``remote-<pid>`` is started next to the session cluster, so these
tests exercise real API-server validation, scheduling, labels, ownerReferences and deletion.
kwok runs no containers, so logs are not exercised here.
"""

from __future__ import annotations

import asyncio
import base64
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client, config
from vkprovider_kubernetes.adapter import KubernetesProvider

from vkprovider.devcluster import Cluster
from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    LABEL_POD_UID,
    Container,
    DeploymentRequest,
    DeploymentStatus,
    EnvVar,
    FileMount,
    LogOptions,
    NoCapacity,
    NotFound,
    Phase,
    Port,
    Transient,
)

pytestmark = pytest.mark.cluster

NAMESPACE = "vk-remote"
GPU = "H100-SXM-80GB"
WAIT = 90.0


@pytest.fixture(scope="module")
async def remote() -> AsyncIterator[Cluster]:
    cluster = await asyncio.wait_for(Cluster.start(f"remote-{os.getpid()}", gpu_nodes=2), 600)
    try:
        yield cluster
    finally:
        await cluster.stop(remove=True)


@pytest.fixture(scope="module")
async def core(remote: Cluster) -> AsyncIterator[Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(remote.kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield client.CoreV1Api(api)


@pytest.fixture
async def provider(remote: Cluster) -> AsyncIterator[KubernetesProvider]:
    settings = KubernetesProvider.Settings(
        kubeconfig=remote.kubeconfig,
        namespace=NAMESPACE,
        create_namespace=True,
        price_per_gpu_hour=2.5,
        region="remote-dc",
        termination_grace_seconds=0,
    )
    adapter = KubernetesProvider("remote-k8s", settings)
    try:
        yield adapter
    finally:
        await adapter.close()


def request_for(node: str, *, gpus: int = 1, **changes: Any) -> DeploymentRequest:
    base: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "namespace": "serving",
        "name": "llm-0",
        "node_name": node,
        "containers": [
            Container(
                name="server",
                image="registry.example/llm:1",
                args=["--port", "8000"],
                env=[EnvVar(name="MODE", value="serve"), EnvVar(name="TOKEN", value="s3cr3t", secret=True)],
                ports=[Port(container_port=8000, name="http")],
                cpu=1.5,
                memory_bytes=2 * 1024**3,
            )
        ],
        "gpu_type": GPU,
        "gpu_count": gpus,
    }
    base.update(changes)
    return DeploymentRequest(**base)


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    async def loop() -> None:
        while not await check():
            await asyncio.sleep(0.2)

    try:
        await asyncio.wait_for(loop(), WAIT)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def running(provider: KubernetesProvider, uid: str) -> DeploymentStatus:
    result: list[DeploymentStatus] = []

    async def check() -> bool:
        status = await provider.get(uid)
        result[:] = [status]
        return status.phase is Phase.RUNNING and status.ready

    await eventually(check, f"{uid} to run")
    return result[0]


async def test_deploy_runs_one_labelled_pod_and_maps_its_status(
    provider: KubernetesProvider, core: Any
) -> None:
    request = request_for("vk-a", gpus=2)
    first = await provider.deploy(request)
    second = await provider.deploy(request)  # idempotent on the uid

    assert first.provider_id == second.provider_id == f"{NAMESPACE}/vk-{request.uid}"
    status = await running(provider, request.uid)
    assert status.uid == request.uid and status.node_name == "vk-a"
    assert status.ip
    assert status.started_at is not None
    assert [c.name for c in status.containers] == ["server"]

    pods = await core.list_namespaced_pod(NAMESPACE, label_selector=f"{LABEL_POD_UID}={request.uid}")
    assert len(pods.items) == 1
    pod = pods.items[0]
    assert pod.metadata.labels[LABEL_NODE_NAME] == "vk-a"
    assert pod.spec.node_selector == {"nvidia.com/gpu.product": GPU}
    container = pod.spec.containers[0]
    assert container.resources.limits == {"nvidia.com/gpu": "2"}
    requests = container.resources.requests  # the API server copies extended-resource limits here
    assert (requests["cpu"], requests["memory"]) == ("1500m", str(2 * 1024**3))
    env = {e.name: e for e in container.env}
    assert env["MODE"].value == "serve"
    assert env["TOKEN"].value is None and env["TOKEN"].value_from.secret_key_ref.name == f"vk-{request.uid}"

    secret = await core.read_namespaced_secret(f"vk-{request.uid}", NAMESPACE)
    assert secret.metadata.owner_references[0].uid == pod.metadata.uid
    assert b"s3cr3t" in [base64.b64decode(v) for v in secret.data.values()]


async def test_list_is_one_label_query_scoped_to_the_node(provider: KubernetesProvider) -> None:
    mine = [request_for("vk-list-a") for _ in range(2)]
    other = request_for("vk-list-b")
    for request in [*mine, other]:
        await provider.deploy(request)

    assert sorted(s.uid for s in await provider.list("vk-list-a")) == sorted(r.uid for r in mine)
    assert [s.uid for s in await provider.list("vk-list-b")] == [other.uid]
    assert await provider.list("vk-list-nobody") == []


async def test_get_and_delete_of_unknown_uids(provider: KubernetesProvider) -> None:
    with pytest.raises(NotFound):
        await provider.get(str(uuid.uuid4()))
    await provider.delete(str(uuid.uuid4()))


async def test_delete_removes_the_pod_and_its_secret(provider: KubernetesProvider, core: Any) -> None:
    request = request_for("vk-del")
    await provider.deploy(request)
    await running(provider, request.uid)

    await provider.delete(request.uid)
    await provider.delete(request.uid)  # twice is fine

    async def gone() -> bool:
        try:
            await provider.get(request.uid)
        except NotFound:
            return True
        return False

    await eventually(gone, "the remote pod to disappear")
    secrets = await core.list_namespaced_secret(NAMESPACE, label_selector=f"{LABEL_POD_UID}={request.uid}")
    assert secrets.items == []


async def test_files_arrive_through_an_owned_secret(provider: KubernetesProvider, core: Any) -> None:
    files = [FileMount(path="/etc/app/config.yaml", content=b"a: 1\n", mode=0o600)]
    request = request_for("vk-files", containers=[Container(name="c", image="x", files=files)])
    await provider.deploy(request)
    pod = await core.read_namespaced_pod(f"vk-{request.uid}", NAMESPACE)
    mount = pod.spec.containers[0].volume_mounts[0]
    assert mount.mount_path == "/etc/app/config.yaml" and mount.sub_path
    secret = await core.read_namespaced_secret(f"vk-{request.uid}", NAMESPACE)
    assert base64.b64decode(secret.data[mount.sub_path]) == b"a: 1\n"


async def test_offers_reflect_allocatable_minus_requested(provider: KubernetesProvider) -> None:
    def single(offers: list[Any]) -> Any:
        return next(o for o in offers if o.gpu_count == 1)

    before = single(await provider.offers())
    assert before.gpu_type == GPU
    assert before.provider == "remote-k8s" and before.region == "remote-dc"
    assert before.price_per_hour == pytest.approx(2.5)
    assert {o.gpu_count for o in await provider.offers()} == {1, 2, 4, 8}

    request = request_for("vk-offers", gpus=4)
    await provider.deploy(request)
    await running(provider, request.uid)
    after = single(await provider.offers())
    assert after.capacity == before.capacity - 4
    await provider.delete(request.uid)


async def test_a_pod_that_fits_nowhere_stays_pending_unschedulable(provider: KubernetesProvider) -> None:
    request = request_for("vk-big", gpus=64)
    await provider.deploy(request)

    async def unschedulable() -> bool:
        status = await provider.get(request.uid)
        return status.phase is Phase.PENDING and status.reason == "Unschedulable"

    await eventually(unschedulable, "the scheduler to give up")
    await provider.delete(request.uid)


async def test_an_unknown_gpu_type_is_no_capacity(provider: KubernetesProvider) -> None:
    with pytest.raises(NoCapacity):
        await provider.deploy(request_for("vk-x", gpu_type="MI300X-192GB"))


async def test_logs_failure_on_a_node_without_kubelet_is_transient(provider: KubernetesProvider) -> None:
    """kwok runs no kubelet, so the API server cannot fetch logs: a clear Transient, not a hang."""
    request = request_for("vk-logs")
    await provider.deploy(request)
    await running(provider, request.uid)
    with pytest.raises(Transient, match="logs"):
        async with asyncio.timeout(30):
            _ = [chunk async for chunk in provider.logs(request.uid, LogOptions(tail_lines=10))]
    with pytest.raises(NotFound):
        _ = [chunk async for chunk in provider.logs(str(uuid.uuid4()), LogOptions())]
    await provider.delete(request.uid)


async def test_a_deleted_pod_reads_as_terminal_or_gone(provider: KubernetesProvider) -> None:
    request = request_for("vk-term")
    await provider.deploy(request)
    await provider.delete(request.uid)
    try:
        status = await provider.get(request.uid)
    except NotFound:
        return
    assert status.phase.terminal


async def test_expose_nodeport_reports_the_services_node_port_and_goes_with_the_pod(
    remote: Cluster, core: Any
) -> None:
    settings = KubernetesProvider.Settings(
        kubeconfig=remote.kubeconfig,
        namespace=NAMESPACE,
        create_namespace=True,
        termination_grace_seconds=0,
        expose="NodePort",
    )
    adapter = KubernetesProvider("remote-exposed", settings)
    try:
        assert (await adapter.info()).capabilities.endpoints
        with pytest.raises(NotFound):
            await adapter.endpoints(str(uuid.uuid4()))
        request = request_for("vk-exposed")
        await adapter.deploy(request)
        status = await running(adapter, request.uid)
        found = await adapter.endpoints(request.uid)
        service = await core.read_namespaced_service(f"vk-{request.uid}", NAMESPACE)
        (port,) = service.spec.ports
        assert service.spec.type == "NodePort" and service.spec.selector == {LABEL_POD_UID: request.uid}
        remote_pod = await core.read_namespaced_pod(f"vk-{request.uid}", NAMESPACE)
        assert status.phase is Phase.RUNNING and remote_pod.status.host_ip
        assert found.addresses == [remote_pod.status.host_ip]  # the node the NodePort is open on
        assert [(m.container_port, m.port) for m in found.ports] == [(8000, port.node_port)]
        assert 30000 <= port.node_port <= 32767

        await adapter.delete(request.uid)

        async def service_gone() -> bool:
            services = await core.list_namespaced_service(
                NAMESPACE, label_selector=f"{LABEL_POD_UID}={request.uid}"
            )
            return not services.items

        await eventually(service_gone, "the Service to go with the pod")
    finally:
        await adapter.close()


async def test_without_expose_there_is_no_endpoints_capability(provider: KubernetesProvider) -> None:
    assert not (await provider.info()).capabilities.endpoints
