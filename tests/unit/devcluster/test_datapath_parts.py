"""The data path's pure parts: the address plan, the load generator's bounds and report, which
kwok pods get a listener, kube-proxy's configuration, and the replicas' HTTP exchange."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest

from vkprovider.devcluster import datapath, kube_proxy, loadgen, pki, replica_http
from vkprovider.devcluster.kwok import SERVE_THROUGH_GRACE_ANNOTATION
from vkprovider.devcluster.pod_listeners import listeners_of
from vkprovider.devcluster.replica_http import BadResponse, get, serve, slow_ms


def test_every_range_is_in_the_benchmarking_block_and_none_overlaps() -> None:
    block = ipaddress.IPv4Network("198.18.0.0/15")
    ranges = [datapath.SERVICE_CIDR, datapath.LINK_CIDR, datapath.POD_CIDR]
    ranges += [datapath.provider_range(i) for i in range(8)]
    networks = [ipaddress.IPv4Network(r) for r in ranges]
    rfc1918 = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
    assert all(n.subnet_of(block) and not any(n.overlaps(p) for p in rfc1918) for n in networks)
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1 :])
    assert datapath.provider_range(0) == "198.19.128.0/20"
    with pytest.raises(ValueError, match="provider index 8"):
        datapath.provider_range(8)


def test_no_namespaces_and_no_nft_is_a_reason_to_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert "nft is not installed" in (datapath.why_unavailable() or "")


@pytest.mark.parametrize(
    ("target", "rate", "duration", "field"),
    [
        ("198.19.64.7", 10, 1, "not a ClusterIP"),  # a pod IP: not through kube-proxy
        ("127.0.0.1", 10, 1, "not a ClusterIP"),
        ("web", 10, 1, "not an IPv4 address"),
        ("198.19.0.10", 0, 1, "rate"),
        ("198.19.0.10", 5000, 1, "rate"),
        ("198.19.0.10", 10, 0, "duration"),
        ("198.19.0.10", 10, 7200, "duration"),
    ],
)
def test_the_load_generator_refuses_anything_but_a_bounded_load_to_a_cluster_ip(
    target: str, rate: float, duration: float, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        loadgen.check_target(target, rate, duration)


def test_the_command_line_names_the_bad_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert loadgen.main(["--netns", "x", "--target", "10.1.2.3:80"]) == 2
    assert "target: 10.1.2.3 is not a ClusterIP" in capsys.readouterr().err
    assert loadgen.main(["--netns", "x", "--target", "198.19.0.9"]) == 2


def test_the_report_says_who_answered_and_the_percentiles() -> None:
    report = loadgen.LoadReport(requests=101, failed=1)
    for i in range(1, 101):
        report.add("local/web-a" if i <= 60 else f"routed/fc-00000{1 + i % 2}", i / 1000)
    assert report.by_where() == {"local": 60, "routed": 40}
    assert report.answered_by == {"local/web-a": 60, "routed/fc-000001": 20, "routed/fc-000002": 20}
    body = report.to_json()
    assert (body["requests"], body["failed"]) == (101, 1)
    assert body["p50_ms"] == pytest.approx(50.5) and body["p99_ms"] == pytest.approx(99.01)
    assert body["by_where"]["local"]["answers"] == 60 and body["by_where"]["local"][
        "p50_ms"
    ] == pytest.approx(30.5)
    assert body["by_where"]["routed"]["p99_ms"] == pytest.approx(99.61)
    assert loadgen.LoadReport().to_json()["p50_ms"] is None
    assert loadgen.who({"where": "local", "pod": "web-a"}) == "local/web-a"
    assert loadgen.who({"where": "external", "provider": "p", "deployment": "d"}) == "p/d"


def pod(ip: str | None = "198.19.64.3", ready: str = "True", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-a", "namespace": "ns", **meta},
        "spec": {
            "nodeName": "dev-gpu-0",
            "containers": [
                {"ports": [{"containerPort": 8000}, {"containerPort": 53, "protocol": "UDP"}]},
                {"ports": [{"containerPort": 9100, "protocol": "TCP"}]},
            ],
        },
        "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": ready}]},
    }


def test_a_ready_kwok_pod_gets_a_listener_per_tcp_port_and_no_other_pod_does() -> None:
    assert listeners_of(pod()) == {
        ("198.19.64.3", 8000): ("ns", "web-a"),
        ("198.19.64.3", 9100): ("ns", "web-a"),
    }
    assert listeners_of(pod(ready="False")) == {}
    assert listeners_of(pod(deletionTimestamp="2026-01-01T00:00:00Z")) == {}  # terminating
    assert listeners_of(pod(ip=None)) == {}
    assert listeners_of(pod(ip="198.19.128.4")) == {}  # a provider's address: the provider serves it


def test_a_pod_that_serves_through_its_grace_keeps_answering_while_it_terminates() -> None:
    graceful = {"annotations": {SERVE_THROUGH_GRACE_ANNOTATION: "true"}}
    assert listeners_of(pod(deletionTimestamp="2026-01-01T00:00:00Z", **graceful)) == listeners_of(pod())
    assert listeners_of(pod(ready="False", deletionTimestamp="2026-01-01T00:00:00Z", **graceful)) == {}


def test_kube_proxy_runs_in_nftables_mode_as_its_own_user() -> None:
    config = kube_proxy.configuration(Path("/k"), "dev-gpu-0")
    assert (config["mode"], config["clusterCIDR"], config["hostnameOverride"]) == (
        "nftables",
        datapath.POD_CIDR,
        "dev-gpu-0",
    )
    assert kube_proxy.kubeconfig(pki.CertPair(Path("c"), Path("k")), Path("ca"))["users"] == [
        {"name": "system:kube-proxy", "user": {"client-certificate": "c", "client-key": "k"}}
    ]


async def test_the_replica_answer_round_trips_and_a_non_200_is_an_error() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]

    async def answer() -> dict[str, Any]:
        return {"pod": "web-a", "where": "local"}

    server = await serve(listener, answer)
    try:
        client = socket.socket()
        client.setblocking(False)
        assert await get(client, "127.0.0.1", port, "/") == {"pod": "web-a", "where": "local"}
    finally:
        server.close()
    with pytest.raises(ConnectionRefusedError):
        refused = socket.socket()
        refused.setblocking(False)
        await get(refused, "127.0.0.1", port)
    assert issubclass(BadResponse, OSError)  # counted as a failed request by the load generator


def test_a_slow_request_asks_for_a_capped_delay_and_nothing_else_is_slow() -> None:
    assert slow_ms("GET /slow?ms=3000 HTTP/1.1") == 3000
    assert slow_ms("GET /slow?ms=99999999 HTTP/1.1") == replica_http.MAX_SLOW_MS
    assert slow_ms("GET /slow?ms=-5 HTTP/1.1") == 0
    assert slow_ms("GET /slow?ms=soon HTTP/1.1") == 0
    assert slow_ms("GET / HTTP/1.1") is None
    assert slow_ms("GET /slowly?ms=10 HTTP/1.1") is None
    assert slow_ms("garbage") is None


async def test_a_slow_request_answers_after_a_later_fast_one_and_too_many_get_a_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replica_http, "MAX_SLOW_REQUESTS", 1)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    order: list[str] = []

    async def answer() -> dict[str, Any]:
        return {"pod": "web-a", "where": "local"}

    def client() -> socket.socket:
        sock = socket.socket()
        sock.setblocking(False)
        return sock

    async def request(path: str) -> None:
        await get(client(), "127.0.0.1", port, path)
        order.append(path)

    server = await serve(listener, answer)
    try:
        slow = [asyncio.create_task(request("/slow?ms=2000")) for _ in range(2)]
        await request("/")  # a plain request is never held back by slow ones
        outcomes = await asyncio.gather(*slow, return_exceptions=True)
    finally:
        server.close()
    # One slot: one slow request answered (after the plain one), the other refused with a 503.
    assert order == ["/", "/slow?ms=2000"]
    (refused,) = [o for o in outcomes if isinstance(o, BaseException)]
    assert isinstance(refused, BadResponse) and "503" in str(refused)
