"""Fixtures several integration files share (the session cluster itself is in tests/conftest.py).

A file that needs a differently configured client defines its own ``kube``, which takes precedence.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import cloud_config, fakecloud_module


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    """An admin client for the session cluster, with room for the bursts a gate test makes."""
    client = await KubeClient.connect(str(cluster.kubeconfig), qps=500, burst=1000)
    yield client
    await client.close()


@pytest.fixture
async def bare_node(kube: KubeClient) -> AsyncIterator[str]:
    """A Node object with no kubelet behind it, for a gate to taint; deleted afterwards."""
    name = f"gate-node-{uuid.uuid4().hex[:6]}"
    await kube.request("POST", "/api/v1/nodes", body={"metadata": {"name": name}})
    yield name
    await kube.request("DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
async def cloud() -> AsyncIterator[Any]:
    """Fakecloud ``remote`` (1.5/h) served on 127.0.0.1, for a ``vkprovider serve`` process to use."""
    server = fakecloud_module("server").FakeCloudServer(cloud_config("remote", 1.5))
    await server.start()
    yield server
    await server.stop()
