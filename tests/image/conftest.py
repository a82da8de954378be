"""The real-kubelet dev cluster shared by the image tests that run pods (test_real_node.py,
test_docs_verbatim.py): module-scoped, so each module gets a fresh cluster and node (one
installs the demo overlay and leaves it, the other uninstalls it as the docs say).
``test_image.py`` defines its own ``image`` and ``cluster`` (podman containers, no node), which
take precedence there."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from tests.image.image_support import built_image
from vkprovider.devcluster import Cluster, metrics_server
from vkprovider.devcluster.kubelet_node import NodeUnavailable, RealNode, unavailable


@pytest.fixture(scope="module")
def image() -> str:
    """The image of ``make image`` (built here when missing); skips where containers cannot run."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    return built_image()


@pytest.fixture(scope="module")
async def cluster(image: str) -> AsyncIterator[Cluster]:
    """A dev cluster with no kwok node (every pod lands on the real one) and metrics-server
    (``kubectl top``, docs/kubelet-api.md)."""
    started = await Cluster.start(f"realnode-{os.getpid()}", gpu_nodes=0)
    try:
        if started.kubelet_net is None:
            pytest.skip("no network namespaces here (ip netns): no real kubelet node")
        await metrics_server.start(started)
        yield started
    finally:
        await started.stop(remove=True)


@pytest.fixture(scope="module")
async def node(cluster: Cluster, image: str) -> AsyncIterator[RealNode]:
    """One real kubelet node, with the image imported (no registry here: the import stands in
    for ``make image-push``)."""
    try:
        started = await RealNode.start(cluster)
    except NodeUnavailable as exc:
        pytest.skip(f"no real kubelet node here: {exc}")
    try:
        await asyncio.to_thread(started.import_image, image)
        yield started
    finally:
        await started.stop()
