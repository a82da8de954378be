"""Contract harness for the remote-Kubernetes adapter: a real second control plane with kwok nodes.

The backend is a real API server, scheduler and controller-manager, so no knob can be injected
into it: ``fail_next``/``delay``/``advance`` stay unimplemented and those tests are skipped. The
kubeconfig is a file, so a plugin subprocess reaches the same cluster (``shared_backend``).
kwok runs no kubelet, so the pod-log API cannot work here; the adapter's ``logs`` switch is off
for this backend (the cluster-backed integration test checks that logs fail as ``Transient``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from vkprovider.contract.harness import Harness, Op
from vkprovider.devcluster import Cluster, Toolchain
from vkprovider.plugins.api import Container, DeploymentRequest, Phase


class KubernetesHarness(Harness):
    adapter = "kubernetes"
    shared_backend = True

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def settings(self) -> dict[str, Any]:
        return {
            "kubeconfig": str(self.cluster.kubeconfig),
            "namespace": "vk-contract",
            "create_namespace": True,
            "termination_grace_seconds": 0,
            "logs": False,
            "price_per_gpu_hour": 1.0,
            "expose": "NodePort",  # the endpoints capability on (a Service per pod with ports)
        }

    async def delay(self, op: Op, seconds: float) -> None:
        """Delays cannot be injected into a real API server; "off" (0) is always true."""
        if seconds:
            raise NotImplementedError

    async def advance(self, uid: str, phase: Phase) -> None:
        """kwok's remote nodes run a scheduled pod by themselves; other phases cannot be forced."""
        if phase is not Phase.RUNNING:
            raise NotImplementedError(f"kwok cannot be told to make a pod {phase.value}")

    def request(self, uid: str, node_name: str) -> DeploymentRequest:
        return DeploymentRequest(
            uid=uid,
            namespace="default",
            name=f"pod-{uid[:8]}",
            node_name=node_name,
            containers=[Container(name="main", image="ghcr.io/example/infer:1")],
            gpu_type="H100-SXM-80GB",
            gpu_count=1,
        )


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    if Toolchain.default().missing():
        pytest.skip("control-plane binaries not built (make cluster-build)")
    cluster = await asyncio.wait_for(Cluster.start(f"contract-remote-{os.getpid()}", gpu_nodes=2), 600)
    try:
        yield KubernetesHarness(cluster)
    finally:
        await cluster.stop(remove=True)
