"""Shared fixtures: one real local control plane per test session, isolated by namespace.

The cluster starts lazily, only when a test asks for it, so unit-only runs stay fast.
Set ``VKPROVIDER_TEST_KEEP_CLUSTER=1`` to leave it running for inspection after the run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client, config

from tests.loop_hygiene import running_servers, stop_leaked
from vkprovider.devcluster import Cluster


@pytest.fixture(autouse=True)
async def no_server_left_running(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Stops (and warns about) a uvicorn server the test left on the shared loop (tests/loop_hygiene.py)."""
    before = set(running_servers())
    yield
    await stop_leaked(before, request.node.nodeid)


@pytest.fixture(scope="session")
async def cluster() -> AsyncIterator[Cluster]:
    started = await Cluster.start(f"pytest-{os.getpid()}", gpu_nodes=2)
    try:
        yield started
    finally:
        if not os.environ.get("VKPROVIDER_TEST_KEEP_CLUSTER"):
            await started.stop(remove=True)


@pytest.fixture(scope="session")
async def api(cluster: Cluster) -> AsyncIterator[client.ApiClient]:
    """An async API client with admin credentials for the session cluster."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace per test (with its default ServiceAccount ready), deleted afterwards."""
    core = client.CoreV1Api(api)
    name = f"t-{uuid.uuid4().hex[:10]}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    for _ in range(200):
        accounts = await core.list_namespaced_service_account(name)
        if any(sa.metadata.name == "default" for sa in accounts.items):
            break
        import asyncio

        await asyncio.sleep(0.05)
    yield name
    await core.delete_namespace(name)
