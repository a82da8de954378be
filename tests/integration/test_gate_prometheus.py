"""The prometheus signal against a real Prometheus (Debian's package, ``make prometheus``)
scraping a small exporter this test serves on 127.0.0.1: the gate follows the value; with
Prometheus stopped, the taint is removed after the timeout with a Warning Event; an invalid
PromQL query is refused at start-up naming the query. And the built-in kube-state-metrics query
over two replicas serving a cluster with a cordoned, a NotReady and a tainted node, and inputs
that stop moving (stale)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from tests.integration.gate_support import GATE_TAINT, node_taints, running_gate
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.prometheus import binary, start_prometheus
from vkprovider.errors import ConfigError
from vkprovider.gate.config import GateConfig, PrometheusSignalConfig
from vkprovider.gate.loop import Gate
from vkprovider.gate.prom_signal import PrometheusSignal
from vkprovider.gate.signal import SignalUnavailable
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


class KsmReplica:
    """One kube-state-metrics replica: the cluster of ``NODES`` in its text format, every sample
    with its own timestamp, as a federated source serves them (kube-state-metrics itself does
    not, and then a dead one's series go stale at once: the other test). ``frozen_at`` (ms): the
    source stopped updating; the series stay queryable (Prometheus writes no staleness marker for
    timestamped samples) and grow old."""

    frozen_at: int | None = None

    def __init__(self) -> None:
        app = FastAPI()

        @app.get("/metrics", response_class=PlainTextResponse)
        async def metrics() -> str:
            stamp = f" {self.frozen_at if self.frozen_at is not None else int(time.time() * 1000)}"
            return "".join(f"{line}{stamp}\n" for line in ksm_lines())

        self.server = AsgiServer(app, "127.0.0.1", 0)


#: node -> (schedulable, Ready status, taints); 8 GPUs each, all in the pool
NODES = {
    "gpu-0": (True, "true", ()),
    "gpu-1": (False, "true", ()),  # cordoned
    "gpu-2": (True, "false", ()),  # NotReady
    "gpu-3": (True, "true", ("dedicated:NoSchedule",)),
    "gpu-4": (True, "true", ("soft:PreferNoSchedule",)),  # still counts
}
#: pod -> (node, GPUs, phase)
PODS = {"serve-0": ("gpu-0", 3, "Running"), "wait": ("gpu-4", 2, "Pending"), "gone": ("gpu-1", 4, "Running")}
FREE = (8 - 3) + (8 - 2)  # gpu-0 and gpu-4 only


def ksm_lines() -> list[str]:
    lines = []
    for node, (schedulable, ready, taints) in NODES.items():
        lines += [
            f'kube_node_status_allocatable{{node="{node}",resource="nvidia_com_gpu",unit="integer"}} 8',
            f'kube_node_labels{{node="{node}",label_pool="local-gpu"}} 1',
            f'kube_node_spec_unschedulable{{node="{node}"}} {int(not schedulable)}',
        ]
        lines += [
            f'kube_node_status_condition{{node="{node}",condition="Ready",status="{s}"}} {int(s == ready)}'
            for s in ("true", "false", "unknown")
        ]
        for taint in taints:
            key, effect = taint.split(":")
            lines.append(f'kube_node_spec_taint{{node="{node}",key="{key}",value="",effect="{effect}"}} 1')
    lines.append('kube_node_status_allocatable{node="cpu-0",resource="nvidia_com_gpu",unit="integer"} 4')
    for pod, (node, gpus, phase) in PODS.items():
        lines.append(
            f'kube_pod_container_resource_requests{{namespace="ml",pod="{pod}",container="c",node="{node}",'
            f'resource="nvidia_com_gpu",unit="integer"}} {gpus}'
        )
        lines += [
            f'kube_pod_status_phase{{namespace="ml",pod="{pod}",phase="{p}"}} {int(p == phase)}'
            for p in ("Pending", "Running", "Succeeded", "Failed")
        ]
    return lines


async def test_the_default_query_on_two_kube_state_metrics_replicas_and_its_freshness_check(
    tmp_path: Path,
) -> None:
    """The built-in query (no query configured) against real Prometheus scraping two replicas:
    cordoned, NotReady and NoSchedule-tainted nodes do not count, the replicas count once (also
    when one goes), and inputs that stop moving are 'stale' once older than the limit."""
    replicas = [KsmReplica(), KsmReplica()]
    for replica in replicas:
        await replica.server.start()
    targets = [f"127.0.0.1:{r.server.port}" for r in replicas]
    prom, url = await start_prometheus(tmp_path / "prom", targets, interval_seconds=1)
    signal = PrometheusSignal(PrometheusSignalConfig(url=url, max_sample_age_seconds=5))

    async def reading() -> float | str:
        try:
            return (await signal.read()).free_gpus
        except SignalUnavailable as exc:
            return exc.kind

    async def reads(value: float | str) -> bool:
        return await reading() == value

    async def series_of_both() -> bool:
        async with httpx.AsyncClient(base_url=url) as client:
            body = (await client.get("/api/v1/query", params={"query": "count(kube_node_labels)"})).json()
        result = body["data"]["result"]
        return bool(result) and float(result[0]["value"][1]) == 2 * len(NODES)

    try:
        await signal.start()
        await eventually(series_of_both, timeout=60)  # both replicas scraped: every series twice
        assert await reading() == FREE
        await replicas[1].server.stop()  # one replica goes: still counted once
        await eventually(lambda: reads(FREE), timeout=30)
        replicas[0].frozen_at = int(time.time() * 1000)
        stale = await eventually(lambda: reads("stale"), timeout=60)
        assert stale
        print(f"[gate prometheus] default query: {FREE} free over 2 replicas; frozen inputs -> stale")
    finally:
        await signal.close()
        prom.stop()
        for replica in replicas:
            await replica.server.stop()
