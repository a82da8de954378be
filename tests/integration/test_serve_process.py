"""``vkprovider serve`` as a real process: config from a file, an out-of-process gRPC plugin,
SIGTERM drains and keeps running deployments, and a restart picks up where it left off."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.serve_process import ServeProcess
from tests.support import bound_gpu_pod, eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


def serve_config(tmp_path: Path, node: str, cloud_url: str) -> JSON:
    """``serve`` with fakecloud ``remote`` through an out-of-process gRPC plugin (its settings
    file written next to the config)."""
    plugin_settings = tmp_path / "plugin.yaml"
    plugin_settings.write_text(yaml.safe_dump({"url": cloud_url}))
    return {
        "node": {"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 1},
        "pods": {"status_poll_seconds": 0.5, "drain_timeout_seconds": 5},
        "providers": [
            {
                "name": "remote",
                "grpc": {
                    "command": [
                        sys.executable,
                        "-m",
                        "vkprovider",
                        "plugin",
                        "serve",
                        "fakecloud",
                        "--name",
                        "remote",
                        "--config",
                        str(plugin_settings),
                    ],
                },
            }
        ],
    }


@dataclass(kw_only=True)
class Served(ServeProcess):
    """One ``vkprovider serve`` process for a fresh node; ``restart`` starts it again."""

    node: str
    kube: KubeClient

    async def restart(self) -> None:
        self.start()
        await self.wait_ready()


@pytest.fixture
async def served(cluster: Cluster, cloud: Any, tmp_path: Path) -> AsyncIterator[Served]:
    node = f"vk-{uuid.uuid4().hex[:8]}"
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    config = serve_config(tmp_path, node, cloud.url)
    service = Served.configured(config, tmp_path / "serve.yaml", cluster.kubeconfig, node=node, kube=kube)
    await service.restart()
    yield service
    await service.close()
    await kube.close()


async def test_serve_drains_on_sigterm_and_resumes_after_restart(
    served: Served, namespace: str, cloud: Any
) -> None:
    kube = served.kube
    created = await kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/pods", body=bound_gpu_pod("solo", served.node)
    )
    uid = created["metadata"]["uid"]

    async def ready_pod() -> JSON | None:
        current: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/solo")
        conditions = {c["type"]: c["status"] for c in current["status"].get("conditions") or []}
        return current if conditions.get("Ready") == "True" else None

    await eventually(ready_pod)
    assert uid in cloud.store.deployments  # deployed through the gRPC plugin process

    assert await served.stop() == 0  # SIGTERM: drain, then a clean exit
    assert uid in cloud.store.deployments  # shutting down never deletes running work
    assert "draining" in served.log.read_text()

    creates = cloud.store.requests.get("POST /v1/deployments", 0)
    await served.restart()
    async with httpx.AsyncClient() as client:
        state = (await client.get(f"http://127.0.0.1:{served.admin_port}/state")).json()
    assert state["deployments"] == 1
    still: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/solo")
    assert still["status"]["phase"] == "Running"
    assert cloud.store.requests.get("POST /v1/deployments", 0) == creates  # adopted, not redeployed


def test_bad_config_is_one_clear_line_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"node": {"name": "Not_A_DNS_Name"}, "pods": {"workers": 0}}))
    result = subprocess.run(
        [sys.executable, "-m", "vkprovider", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "node.name" in result.stderr and "pods.workers" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_adapter_names_the_provider(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"providers": [{"name": "typo", "adapter": "fakeclod"}]}))
    result = subprocess.run(
        [sys.executable, "-m", "vkprovider", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "VKPROVIDER_KUBE__KUBECONFIG": "/nonexistent"},
    )
    assert result.returncode == 2
    assert "typo" in result.stderr and "fakeclod" in result.stderr
    assert "Traceback" not in result.stderr


async def test_sigkill_then_restart_cleans_up_pods_deleted_while_down(
    served: Served, namespace: str, cloud: Any
) -> None:
    kube = served.kube
    uids = {}
    for name in ("keep", "drop"):
        created = await kube.request(
            "POST", f"/api/v1/namespaces/{namespace}/pods", body=bound_gpu_pod(name, served.node)
        )
        uids[name] = created["metadata"]["uid"]

    async def both_deployed() -> bool:
        return set(uids.values()) <= set(cloud.store.deployments)

    await eventually(both_deployed)
    assert await served.stop(signal.SIGKILL) == -signal.SIGKILL
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/drop", body={"gracePeriodSeconds": 0})
    creates = cloud.store.requests.get("POST /v1/deployments", 0)
    await served.restart()

    async def cleaned() -> bool:
        return uids["drop"] not in cloud.store.deployments

    await eventually(cleaned)
    assert uids["keep"] in cloud.store.deployments
    assert cloud.store.requests.get("POST /v1/deployments", 0) == creates  # no duplicate deploys

    async def keep_running() -> bool:
        pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/keep")
        return bool(pod["status"].get("phase") == "Running")

    await eventually(keep_running)


async def test_a_provider_refusing_connections_at_start_is_probed_and_its_errors_collapse(
    cluster: Cluster, cloud: Any, tmp_path: Path
) -> None:
    """Start-up does not wait for providers: one that refuses connections is reported unreachable
    (a node condition) and its repeated errors are logged once, not once per probe."""
    node, closed = f"vk-{uuid.uuid4().hex[:8]}", free_port()
    config = {
        "node": {"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 0.3},
        "pods": {"status_poll_seconds": 0.3},
        "placement": {"offer_refresh_seconds": 0.3},
        "providers": [
            {"name": "live", "adapter": "fakecloud", "settings": {"url": cloud.url}},
            {"name": "dead", "adapter": "fakecloud", "settings": {"url": f"http://127.0.0.1:{closed}"}},
        ],
    }
    serve = ServeProcess.configured(config, tmp_path / "serve.yaml", cluster.kubeconfig)
    serve.start()
    log = serve.log
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    try:
        await serve.wait_ready()

        async def reported() -> bool:
            got = await kube.request("GET", f"/api/v1/nodes/{node}")
            conds = {c["type"]: c for c in got["status"]["conditions"]}
            reach = conds["ProvidersReachable"]
            return conds["Ready"]["status"] == "True" and reach["message"].startswith("unreachable: dead")

        await eventually(reported, timeout=30)
        await asyncio.sleep(10)  # ~30 probes, catalog refreshes and status polls of "dead"
    finally:
        await serve.stop()
        await kube.request("DELETE", f"/api/v1/nodes/{node}")
        await kube.close()
    lines = [line for line in log.read_text().splitlines() if "provider=dead" in line]
    assert "Traceback" not in log.read_text()
    assert any("provider unreachable: probe failed" in line for line in lines), lines
    by_message: dict[str, int] = {}
    for line in lines:
        message = line.split(": ", 1)[1]
        by_message[message] = by_message.get(message, 0) + 1
    assert by_message and max(by_message.values()) == 1, by_message  # ~30 repeats, each logged once
