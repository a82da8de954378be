"""The kubelet API over real TLS: client certificates, logs options and errors, pods, metrics."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kubelet_tls import Source, Tracked
from tests.unit.http.test_auth import Reviews
from vkprovider.devcluster import pki
from vkprovider.http.auth import Authenticator
from vkprovider.http.kubelet import create_kubelet_app, server_tls
from vkprovider.http.server import AsgiServer
from vkprovider.models import Capabilities, ContainerUsage, DeploymentUsage, LogOptions, ProviderInfo
from vkprovider.plugins.guard import guard
from vkprovider.plugins.memory import InMemoryProvider

LINES = [f"line {i}" for i in range(10)]


class LoggingCloud(InMemoryProvider):
    """Logs and usage from memory; records what it was asked and whether streams were closed."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.asked: list[LogOptions] = []
        self.open_streams = 0
        self.cpu = 0.0

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self.name, adapter="logging", version="0", capabilities=Capabilities(logs=True, metrics=True)
        )

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        self.asked.append(options)
        self.open_streams += 1
        try:
            if options.since_seconds == 1:  # nothing logged in the last second: a quiet follow
                await asyncio.sleep(3600)
            lines = LINES[-options.tail_lines :] if options.tail_lines else LINES
            data = "".join(f"{line}\n" for line in lines).encode()
            yield data[: options.limit_bytes] if options.limit_bytes else data
            while options.follow:
                await asyncio.sleep(0.05)
                yield b"more\n"
        finally:
            self.open_streams -= 1

    async def usage(self, node_name: str) -> list[DeploymentUsage]:
        self.cpu += 1.5
        now = datetime.now(UTC)
        return [
            DeploymentUsage(
                uid="uid-1",
                timestamp=now,
                containers=[
                    ContainerUsage(
                        name="server",
                        cpu_seconds_total=self.cpu,
                        cpu_cores=0.25,
                        memory_working_set_bytes=2**20,
                    )
                ],
            )
        ]


class PlainCloud(InMemoryProvider):
    """No logs, no usage."""


def pod(name: str, uid: str, running: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {"containers": [{"name": "server", "image": "img"}]},
        "status": {
            "phase": "Running" if running else "Pending",
            "startTime": "2026-01-01T00:00:00Z",
            "containerStatuses": [
                {"name": "server", "image": "img", "state": {"running": {}} if running else {"waiting": {}}}
            ],
        },
    }


@dataclass
class Kubelet:
    url: str
    cloud: LoggingCloud
    apiserver: ssl.SSLContext  #: TLS with the apiserver's kubelet client certificate
    stranger: ssl.SSLContext  #: TLS with a certificate of a CA the kubelet does not trust
    anonymous: ssl.SSLContext  #: TLS without a client certificate


def _client_context(ca: Path, pair: pki.CertPair | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if pair is not None:
        context.load_cert_chain(str(pair.cert), str(pair.key))
    return context


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[Kubelet]:
    ca = pki.CertificateAuthority.create(tmp_path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = pki.CertificateAuthority.create(other_dir, "someone-else")
    serving = ca.issue(tmp_path, "serving", "vk", server=True, ip_addresses=("127.0.0.1",))
    client_cert = ca.issue(
        tmp_path, "client", "kube-apiserver-kubelet-client", organization="system:masters", client=True
    )
    forged = other.issue(
        other_dir, "client", "kube-apiserver-kubelet-client", organization="system:masters", client=True
    )
    cloud = LoggingCloud("logging")
    source = Source({"logging": guard(cloud), "plain": guard(PlainCloud("plain"))})
    source.cache = {
        "ns/web": pod("web", "uid-1"),
        "ns/quiet": pod("quiet", "uid-2"),
        "ns/new": pod("new", "uid-3", False),
    }
    source.tracked = {"uid-1": Tracked("logging"), "uid-2": Tracked("plain")}
    reviews = Reviews(
        {},
        {
            ("kube-apiserver-kubelet-client", verb, sub)
            for verb in ("get", "create")
            for sub in ("proxy", "stats", "metrics", "pods")
        },
    )
    app = create_kubelet_app(source, Authenticator(reviews, "vk"))
    server = AsgiServer(
        app, "127.0.0.1", 0, ssl_context=server_tls(str(serving.cert), str(serving.key), str(ca.pair.cert))
    )
    await server.start()
    try:
        yield Kubelet(
            server.url,
            cloud,
            _client_context(ca.pair.cert, client_cert),
            _client_context(ca.pair.cert, forged),
            _client_context(ca.pair.cert, None),
        )
    finally:
        await server.stop()


def http(kubelet: Kubelet, context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=kubelet.url, verify=context or kubelet.apiserver, timeout=10)


async def test_client_certificate_is_the_way_in_and_others_are_refused(kubelet: Kubelet) -> None:
    async with http(kubelet) as c:
        assert (await c.get("/healthz")).text == "ok"
    async with http(kubelet, kubelet.anonymous) as c:
        resp = await c.get("/pods")
        assert resp.status_code == 401
    async with http(kubelet, kubelet.stranger) as c:
        with pytest.raises(httpx.HTTPError):  # an untrusted CA fails the TLS handshake
            await c.get("/pods")


async def test_pods_and_running_pods(kubelet: Kubelet) -> None:
    async with http(kubelet) as c:
        pods = (await c.get("/pods")).json()
        assert pods["kind"] == "PodList" and {p["metadata"]["name"] for p in pods["items"]} == {
            "web",
            "quiet",
            "new",
        }
        running = (await c.get("/runningpods/")).json()
        assert {p["metadata"]["name"] for p in running["items"]} == {"web", "quiet"}
        assert running["items"][0]["spec"]["containers"] == [{"name": "server", "image": "img"}]


async def test_logs_pass_options_and_answer_bad_input_clearly(kubelet: Kubelet) -> None:
    async with http(kubelet) as c:
        whole = await c.get("/containerLogs/ns/web/server")
        assert whole.status_code == 200 and whole.text.splitlines() == LINES
        tail = await c.get("/containerLogs/ns/web/server", params={"tailLines": "2", "timestamps": "true"})
        assert tail.text.splitlines() == LINES[-2:]
        limited = await c.get("/containerLogs/ns/web/server", params={"limitBytes": "5"})
        assert limited.text == "line "
        since = await c.get("/containerLogs/ns/web/server", params={"sinceTime": "2020-01-01T00:00:00Z"})
        assert since.status_code == 200
        asked = kubelet.cloud.asked
        assert asked[1].tail_lines == 2 and asked[1].timestamps and asked[2].limit_bytes == 5
        assert asked[3].since_seconds is not None and asked[3].since_seconds > 100_000_000
        cases = {
            ("/containerLogs/ns/web/server", "tailLines", "-1"): (400, "tailLines"),
            ("/containerLogs/ns/web/server", "sinceTime", "yesterday"): (400, "sinceTime"),
            ("/containerLogs/ns/web/server", "limitBytes", "x"): (400, "limitBytes"),
            ("/containerLogs/ns/web/server", "previous", "true"): (400, "previous terminated container"),
            ("/containerLogs/ns/ghost/server", "", ""): (404, "pod ns/ghost not found"),
            ("/containerLogs/ns/web/sidecar", "", ""): (404, "container 'sidecar' is not valid"),
            ("/containerLogs/ns/quiet/server", "", ""): (501, "provider 'plain' does not support logs"),
            ("/containerLogs/ns/new/server", "", ""): (404, "no deployment"),
            ("/exec/ns/web/server", "command", "sh"): (501, "provider 'logging'"),
            ("/portForward/ns/web", "", ""): (501, "'portForward' capability"),
        }
        for (path, key, value), (status, text) in cases.items():
            resp = await c.get(path, params={key: value} if key else None)
            assert (resp.status_code, text in resp.text) == (status, True), (path, resp.text)


async def test_a_client_leaving_mid_follow_releases_the_provider_stream(kubelet: Kubelet) -> None:
    async with (
        http(kubelet) as c,
        c.stream("GET", "/containerLogs/ns/web/server", params={"follow": "true"}) as resp,
    ):
        got = b""
        async for chunk in resp.aiter_bytes():
            got += chunk
            if got.count(b"more") >= 2:
                break
    assert kubelet.cloud.asked[-1].follow
    for _ in range(200):
        if kubelet.cloud.open_streams == 0:
            break
        await asyncio.sleep(0.05)
    assert kubelet.cloud.open_streams == 0


async def test_resource_metrics_and_summary_carry_kubelet_names(kubelet: Kubelet) -> None:
    async with http(kubelet) as c:
        text = (await c.get("/metrics/resource")).text
        text = (await c.get("/metrics/resource")).text  # second scrape: the counters advanced
        summary = (await c.get("/stats/summary")).json()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    sample = next(line for line in lines if line.startswith("container_cpu_usage_seconds_total{"))
    assert 'container="server"' in sample and 'namespace="ns"' in sample and 'pod="web"' in sample
    _name, value, stamp = sample.rsplit(" ", 2)
    assert float(value) == 3.0 and int(stamp) > 1_700_000_000_000
    for metric in (
        "container_memory_working_set_bytes",
        "pod_cpu_usage_seconds_total",
        "pod_memory_working_set_bytes",
        "node_cpu_usage_seconds_total",
        "node_memory_working_set_bytes",
    ):
        assert any(line.startswith(metric) for line in lines), metric
    assert any(
        line == "node_memory_working_set_bytes " + str(2**20) + " " + line.rsplit(" ", 1)[1] for line in lines
    )
    node_cpu = float(
        next(line for line in lines if line.startswith("node_cpu_usage_seconds_total")).split()[1]
    )
    assert node_cpu == 3.0
    assert "resource_scrape_error 0" in lines
    (web,) = summary["pods"]
    assert web["podRef"] == {"name": "web", "namespace": "ns", "uid": "uid-1"}
    assert web["containers"][0]["cpu"]["usageNanoCores"] == 250_000_000
    assert summary["node"]["nodeName"] == "vk" and summary["node"]["memory"]["workingSetBytes"] == 2**20


async def test_a_quiet_follow_answers_and_leaving_it_releases_the_stream(kubelet: Kubelet) -> None:
    params = {"follow": "true", "sinceSeconds": "1"}
    async with http(kubelet) as c, c.stream("GET", "/containerLogs/ns/web/server", params=params) as resp:
        assert resp.status_code == 200  # after the short wait for a first line
        assert kubelet.cloud.open_streams == 1
    for _ in range(200):
        if kubelet.cloud.open_streams == 0:
            break
        await asyncio.sleep(0.05)
    assert kubelet.cloud.open_streams == 0
