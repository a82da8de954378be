"""The informer against a real apiserver: list, watch, deletions, and a relist after 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeGone
from vkprovider.kube.informer import Informer

pytestmark = pytest.mark.cluster


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(str(cluster.kubeconfig))
    yield client
    await client.close()


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "i"}]},
    }


class ExpiringInformer(Informer):
    """Its first watch is answered with 410 Gone, as the apiserver does once a resourceVersion
    has been compacted away (which a fresh test cluster's watch cache never does in time)."""

    async def _watch(self, resource_version: str) -> None:
        if self.relists == 1:
            raise KubeGone(410, "too old resource version")
        return await super()._watch(resource_version)


async def test_informer_relists_after_410_and_keeps_watching(kube: KubeClient, namespace: str) -> None:
    seen: list[tuple[str, str]] = []
    informer = ExpiringInformer(
        kube,
        f"/api/v1/namespaces/{namespace}/pods",
        handler=lambda kind, old, new: seen.append((kind, new["metadata"]["name"])),
    )
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("before"))
    task = asyncio.create_task(informer.run())
    try:

        async def relisted() -> bool:
            return informer.relists >= 2

        await eventually(relisted, timeout=30)
        assert "/before" in "".join(informer.cache)
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("after"))

        async def watched() -> bool:
            return ("ADDED", "after") in seen

        await eventually(watched, timeout=30)
        await kube.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods/after", body={"gracePeriodSeconds": 0}
        )

        async def deleted() -> bool:
            return ("DELETED", "after") in seen and not any(k.endswith("/after") for k in informer.cache)

        await eventually(deleted, timeout=30)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
