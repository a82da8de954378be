"""The gate inside ``vkprovider serve`` (a real process), and ``vkprovider gate`` standalone:
the taint appears on the virtual node, SIGTERM leaves it, and a selector that matches no node
stops start-up with the field named."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.integration.gate_support import GATE_TAINT, node_taints
from tests.support import eventually, vkprovider_process
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient

pytestmark = pytest.mark.cluster

GATE = {"taint_at_free_gpus": 1, "dwell_seconds": 0, "min_flip_interval_seconds": 0, "interval_seconds": 0.5}


def write_config(tmp_path: Path, node: str, cloud_url: str, gate: dict[str, Any] | None) -> Path:
    config = {
        "node": {"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 1},
        "pods": {"drain_timeout_seconds": 2},
        "http": {"admin_port": free_port()},
        "providers": [{"name": "remote", "adapter": "fakecloud", "settings": {"url": cloud_url}}],
        "gate": gate,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(asyncio.to_thread(proc.wait), 30)


async def test_serve_runs_the_gate_and_sigterm_leaves_its_taint(
    cluster: Cluster, cloud: Any, kube: KubeClient, tmp_path: Path
) -> None:
    node = f"vk-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "serve.log"
    config = write_config(tmp_path, node, cloud.url, GATE)
    proc = vkprovider_process("serve", config, cluster.kubeconfig, log)
    try:

        async def tainted() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                return any(t["key"] == GATE_TAINT for t in await node_taints(kube, node))
            except Exception:
                return False  # the node is not registered yet

        await eventually(tainted, timeout=90)
        admin_port = yaml.safe_load(config.read_text())["http"]["admin_port"]
        async with httpx.AsyncClient() as client:
            state = (await client.get(f"http://127.0.0.1:{admin_port}/state")).json()
        assert state["gate"]["tainted"] is True and state["gate"]["signal"] == "kube"
        assert state["gate"]["recent_flips"][0]["reason"] == "LocalCapacityAvailable"
        assert await stop(proc) == 0
        taints = await node_taints(kube, node)
        assert GATE_TAINT in [t["key"] for t in taints]  # stopping never removes it
        assert "gate running on node" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await kube.request("DELETE", f"/api/v1/nodes/{node}")


@pytest.mark.parametrize("command", ["serve", "gate"])
def test_a_selector_matching_no_node_is_refused_at_start_up(
    cluster: Cluster, cloud: Any, tmp_path: Path, command: str
) -> None:
    gate = {**GATE, "signal": {"kind": "kube", "kube": {"node_selector": "pool=no-such-pool"}}}
    config = write_config(tmp_path, f"vk-{uuid.uuid4().hex[:8]}", cloud.url, gate)
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
    log = tmp_path / "gate.log"
    proc = vkprovider_process("gate", write_config(tmp_path, node, cloud.url, GATE), cluster.kubeconfig, log)
    try:

        async def tainted() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return any(t["key"] == GATE_TAINT for t in await node_taints(kube, node))

        await eventually(tainted, timeout=60)
        assert await stop(proc) == 0
        assert GATE_TAINT in [t["key"] for t in await node_taints(kube, node)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await kube.request("DELETE", f"/api/v1/nodes/{node}")
