"""The gate inside ``vkprovider serve`` (a real process), and ``vkprovider gate`` standalone:
the taint appears on the virtual node, SIGTERM leaves it, and a selector that matches no node
stops start-up with the field named."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.gate_support import GATE_TAINT, node_taints
from tests.serve_process import ServeProcess, write_config
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient

pytestmark = pytest.mark.cluster

GATE = {"taint_at_free_gpus": 1, "dwell_seconds": 0, "min_flip_interval_seconds": 0, "interval_seconds": 0.5}


def serve_config(node: str, cloud_url: str, gate: dict[str, Any] | None) -> dict[str, Any]:
    """``serve`` (or ``gate``) for ``node`` over fakecloud ``remote``, with ``gate``."""
    return {
        "node": {"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 1},
        "pods": {"drain_timeout_seconds": 2},
        "providers": [{"name": "remote", "adapter": "fakecloud", "settings": {"url": cloud_url}}],
        "gate": gate,
    }


async def test_serve_runs_the_gate_and_sigterm_leaves_its_taint(
    cluster: Cluster, cloud: Any, kube: KubeClient, tmp_path: Path
) -> None:
    node = f"vk-{uuid.uuid4().hex[:8]}"
    serve = ServeProcess.configured(
        serve_config(node, cloud.url, GATE), tmp_path / "serve.yaml", cluster.kubeconfig
    )
    serve.start()
    try:

        async def tainted() -> bool:
            assert serve.alive(), serve.log_tail()
            try:
                return any(t["key"] == GATE_TAINT for t in await node_taints(kube, node))
            except Exception:
                return False  # the node is not registered yet

        await eventually(tainted, timeout=90)
        async with httpx.AsyncClient() as client:
            state = (await client.get(f"{serve.url}/state")).json()
        assert state["gate"]["tainted"] is True and state["gate"]["signal"] == "kube"
        assert state["gate"]["recent_flips"][0]["reason"] == "LocalCapacityAvailable"
        assert await serve.stop() == 0
        taints = await node_taints(kube, node)
        assert GATE_TAINT in [t["key"] for t in taints]  # stopping never removes it
        assert "gate running on node" in serve.log.read_text()
    finally:
        await serve.close()
        await kube.request("DELETE", f"/api/v1/nodes/{node}")


@pytest.mark.parametrize("command", ["serve", "gate"])
def test_a_selector_matching_no_node_is_refused_at_start_up(
    cluster: Cluster, cloud: Any, tmp_path: Path, command: str
) -> None:
    gate = {**GATE, "signal": {"kind": "kube", "kube": {"node_selector": "pool=no-such-pool"}}}
    config = tmp_path / "config.yaml"
    write_config(config, serve_config(f"vk-{uuid.uuid4().hex[:8]}", cloud.url, gate))
    result = subprocess.run(
        [sys.executable, "-m", "vkprovider", command, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "VKPROVIDER_KUBE__KUBECONFIG": str(cluster.kubeconfig)},
    )
    assert result.returncode == 2, result.stderr
    assert "gate.signal.kube.node_selector: 'pool=no-such-pool' matches no node" in result.stderr
    assert "Traceback" not in result.stderr


async def test_standalone_gate_taints_and_sigterm_leaves_it(
    cluster: Cluster, cloud: Any, kube: KubeClient, tmp_path: Path
) -> None:
    node = f"vk-{uuid.uuid4().hex[:8]}"
    await kube.request("POST", "/api/v1/nodes", body={"metadata": {"name": node}})
    config = serve_config(node, cloud.url, GATE)
    gate = ServeProcess.configured(config, tmp_path / "gate.yaml", cluster.kubeconfig, command="gate")
    gate.start()
    try:

        async def tainted() -> bool:
            assert gate.alive(), gate.log_tail()
            return any(t["key"] == GATE_TAINT for t in await node_taints(kube, node))

        await eventually(tainted, timeout=60)
        assert await gate.stop() == 0
        assert GATE_TAINT in [t["key"] for t in await node_taints(kube, node)]
    finally:
        await gate.close()
        await kube.request("DELETE", f"/api/v1/nodes/{node}")
