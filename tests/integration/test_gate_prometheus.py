"""The prometheus signal against a real Prometheus (Debian's package, ``make prometheus``)
scraping a small exporter this test serves on 127.0.0.1: the gate follows the value; with
Prometheus stopped, the taint is removed after the timeout with a Warning Event; an invalid
PromQL query is refused at start-up naming the query."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from tests.integration.gate_support import GATE_TAINT, node_taints, running_gate
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.prometheus import binary, start_prometheus
from vkprovider.errors import ConfigError
from vkprovider.gate.config import GateConfig
from vkprovider.gate.loop import Gate
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(binary() is None, reason="prometheus not installed: run `make prometheus`"),
]


class Exporter:
    """Serves ``free_local_gpus <value>`` in the Prometheus text format."""

    def __init__(self) -> None:
        self.value = 0.0
        app = FastAPI()

        @app.get("/metrics", response_class=PlainTextResponse)
        async def metrics() -> str:
            return f"# TYPE free_local_gpus gauge\nfree_local_gpus {self.value}\n"

        self.server = AsgiServer(app, "127.0.0.1", 0)


@pytest.fixture
async def exporter() -> AsyncIterator[Exporter]:
    exp = Exporter()
    await exp.server.start()
    yield exp
    await exp.server.stop()


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(str(cluster.kubeconfig))
    yield client
    await client.close()


@pytest.fixture
async def bare_node(kube: KubeClient) -> AsyncIterator[str]:
    """A Node object for the gate to taint (no kubelet: the node controller adds its own taints)."""
    name = f"gate-prom-{uuid.uuid4().hex[:6]}"
    await kube.request(
        "POST", "/api/v1/nodes", body={"metadata": {"name": name, "labels": {"type": "virtual-kubelet"}}}
    )
    yield name
    await kube.request("DELETE", f"/api/v1/nodes/{name}")


async def tainted(kube: KubeClient, node: str) -> bool:
    return any(t.get("key") == GATE_TAINT for t in await node_taints(kube, node))


async def untainted(kube: KubeClient, node: str) -> bool:
    return not await tainted(kube, node)


async def warning_events(kube: KubeClient, node: str) -> list[dict[str, Any]]:
    body = await kube.request(
        "GET", "/api/v1/namespaces/default/events", query={"fieldSelector": f"involvedObject.name={node}"}
    )
    return [
        e
        for e in body["items"]
        if e["type"] == "Warning" and e.get("reportingComponent") == "vkprovider-gate"
    ]


async def test_the_gate_follows_prometheus_and_fails_open_when_it_stops(
    kube: KubeClient, bare_node: str, exporter: Exporter, tmp_path: Path
) -> None:
    prom, url = await start_prometheus(
        tmp_path / "prom", [f"127.0.0.1:{exporter.server.port}"], interval_seconds=1
    )
    try:
        signal = {
            "kind": "prometheus",
            "prometheus": {"url": url, "query": 'free_local_gpus{job="exporter"}'},
        }
        bad = GateConfig.model_validate(
            {"signal": {"kind": "prometheus", "prometheus": {"url": url, "query": "sum(free_local_gpus"}}}
        )
        with pytest.raises(ConfigError, match=r"gate\.signal\.prometheus\.query: .*sum\(free_local_gpus"):
            await Gate(kube, bad, bare_node).preflight()

        exporter.value = 8
        async with running_gate(
            kube,
            bare_node,
            signal=signal,
            dwell_seconds=1,
            min_flip_interval_seconds=1,
            signal_timeout_seconds=6,
        ) as gate:
            await eventually(lambda: tainted(kube, bare_node), timeout=60)
            exporter.value = 0
            await eventually(lambda: untainted(kube, bare_node), timeout=60)
            exporter.value = 6
            await eventually(lambda: tainted(kube, bare_node), timeout=60)
            assert gate.snapshot()["free_gpus"] == 6
            assert not await warning_events(kube, bare_node)

            prom.stop()
            await eventually(lambda: untainted(kube, bare_node), timeout=60)
            (event,) = await eventually(lambda: warning_events(kube, bare_node), timeout=30)
            assert event["reason"] == "SignalUnavailable"
            assert "free_local_gpus" in event["message"] and "timeout 6s" in event["message"]
            assert gate.snapshot()["signal_error"].startswith("unreachable")
            assert [f["direction"] for f in gate.flips] == ["taint", "untaint", "taint", "untaint"]
    finally:
        prom.stop()
