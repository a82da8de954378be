"""The kubelet API through the real apiserver: proxy, kubectl logs, metrics, authn/authz.

The dev cluster gives the virtual node an address in 198.18.0.0/15 (a veth pair into a network
namespace it created), because the apiserver will not proxy to loopback; the apiserver verifies
our serving certificate (``--kubelet-certificate-authority``) and presents its kubelet client
certificate, which we verify against the cluster CA.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from vkprovider_fakecloud.config import parse_config
from vkprovider_fakecloud.server import running_fakecloud

from tests.support import eventually
from vkprovider.cli import main
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient
from vkprovider.service import Service

pytestmark = pytest.mark.cluster

SECRET_VALUE = "s3cret-value-never-logged"
JSON = dict[str, Any]


@dataclass
class Node:
    name: str
    kubelet_url: str
    admin_url: str
    service: Service
    kube: KubeClient
    cloud_admin: str


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


async def kubectl(cluster: Cluster, *args: str, timeout: float = 60) -> Done:
    """kubectl without blocking the loop (the kubelet API under test serves on this loop)."""
    proc = await asyncio.create_subprocess_exec(
        str(Toolchain.default().binary("kubectl")),
        *args,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return Done(proc.returncode or 0, out.decode(), err.decode())


@pytest.fixture
async def node(cluster: Cluster) -> AsyncIterator[Node]:
    net, serving = cluster.kubelet_net, cluster.kubelet_serving
    if net is None or serving is None:
        pytest.skip("the dev cluster could not create its kubelet network namespace (needs ip netns)")
    cloud = parse_config(
        {
            "provider": "logs",
            "catalog": [{"id": "h100", "gpu_type": "H100-SXM-80GB", "price_per_hour": 1.0, "capacity": 8}],
            "lifecycle": {
                "provisioning_seconds": 0.2,
                "serving_after_seconds": 0.2,
                "log_interval_seconds": 0.2,
                "log_lines": ["loading model weights"],
            },
        }
    )
    name = f"vk-{uuid.uuid4().hex[:8]}"
    port = free_port()
    async with running_fakecloud(cloud) as server:
        settings = Settings(
            node={"name": name, "internal_ip": net.host_ip, "kubelet_port": port, "status_update_seconds": 2},
            kube={"kubeconfig": str(cluster.kubeconfig)},
            pods={"status_poll_seconds": 0.5, "drain_timeout_seconds": 2},
            http={"admin_host": "0.0.0.0", "admin_port": 0},
            kubelet={
                "tls_cert_file": str(serving.cert),
                "tls_key_file": str(serving.key),
                "client_ca_file": str(cluster.ca_cert),
            },
            providers=[{"name": "logs", "adapter": "fakecloud", "settings": {"url": server.url}}],
        )
        service = Service(settings)
        task = asyncio.create_task(service.run())
        kube = await KubeClient.connect(str(cluster.kubeconfig))
        try:
            await eventually(lambda: _started(service, task), timeout=60)
            assert service.admin is not None
            yield Node(
                name,
                f"https://{net.host_ip}:{port}",
                f"http://127.0.0.1:{service.admin.port}",
                service,
                kube,
                server.url + "/admin",
            )
        finally:
            service.stopping.set()
            await asyncio.wait_for(task, 30)
            await kube.close()


async def _started(service: Service, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()
    return (
        service.kubelet is not None and service.controller is not None and service.controller.synced.is_set()
    )


async def run_pod(node: Node, namespace: str, name: str = "web") -> JSON:
    pod = {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node.name,
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "containers": [
                {
                    "name": "server",
                    "image": "registry.example/llm:1",
                    "env": [{"name": "API_TOKEN", "value": SECRET_VALUE}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }
    await node.kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)

    async def running() -> JSON | None:
        got = await node.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        return got if got.get("status", {}).get("phase") == "Running" else None

    result: JSON = await eventually(running, timeout=60)
    return result


async def service_account_token(node: Node, namespace: str, name: str) -> str:
    await node.kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": name}}
    )
    review = await node.kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    return str(review["status"]["token"])


async def test_apiserver_proxies_pods_runningpods_stats_and_metrics(
    cluster: Cluster, node: Node, namespace: str
) -> None:
    await run_pod(node, namespace)
    base = f"/api/v1/nodes/{node.name}/proxy"
    pods = await kubectl(cluster, "get", "--raw", f"{base}/pods")
    assert pods.returncode == 0, pods.stderr
    assert '"kind":"PodList"' in pods.stdout.replace(" ", "") and f'"namespace":"{namespace}"' in pods.stdout
    running = await kubectl(cluster, "get", "--raw", f"{base}/runningpods/")
    assert running.returncode == 0 and '"web"' in running.stdout, running.stderr

    async def metrics_with_pod() -> str | None:
        done = await kubectl(cluster, "get", "--raw", f"{base}/metrics/resource")
        return done.stdout if 'pod="web"' in done.stdout else None

    text = await eventually(metrics_with_pod, timeout=30)
    assert (
        f'container_cpu_usage_seconds_total{{container="server",namespace="{namespace}",pod="web"}}' in text
    )
    assert "node_memory_working_set_bytes" in text
    summary = await kubectl(cluster, "get", "--raw", f"{base}/stats/summary")
    assert summary.returncode == 0 and f'"nodeName":"{node.name}"' in summary.stdout.replace(" ", "")


async def test_kubectl_logs_plain_tail_limit_and_follow(
    cluster: Cluster, node: Node, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await run_pod(node, namespace)

    async def logs_with_heartbeats() -> str | None:
        done = await kubectl(cluster, "logs", "-n", namespace, "web")
        return done.stdout if done.returncode == 0 and "heartbeat 3" in done.stdout else None

    plain = await eventually(logs_with_heartbeats, timeout=30)
    assert (
        "container server started" in plain and "env: API_TOKEN" in plain and "loading model weights" in plain
    )
    assert SECRET_VALUE not in plain
    tail = await kubectl(cluster, "logs", "-n", namespace, "web", "--tail=2")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 2, tail.stderr
    limited = await kubectl(cluster, "logs", "-n", namespace, "web", "--limit-bytes=12")
    assert limited.returncode == 0 and len(limited.stdout.encode()) == 12, limited.stderr
    since = await kubectl(cluster, "logs", "-n", namespace, "web", "--since=1h")
    assert since.returncode == 0 and "container server started" in since.stdout
    bad = await kubectl(cluster, "logs", "-n", namespace, "web", "-c", "sidecar")
    assert bad.returncode != 0 and "sidecar" in bad.stderr

    follow = await asyncio.create_subprocess_exec(
        str(Toolchain.default().binary("kubectl")),
        *("logs", "-f", "-n", namespace, "web", "--tail=1"),
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert follow.stdout is not None
        lines = [(await asyncio.wait_for(follow.stdout.readline(), 30)).decode() for _ in range(4)]
        assert all("heartbeat" in line for line in lines[1:]), lines  # new lines keep arriving
    finally:
        follow.terminate()
        await follow.wait()
    assert SECRET_VALUE not in caplog.text


async def test_kubelet_api_authn_authz_direct(
    cluster: Cluster, node: Node, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Straight to the kubelet port, as anything on the network could: 401, 403, 200."""
    caplog.set_level(logging.DEBUG)
    ca = ssl.create_default_context(cafile=str(cluster.ca_cert))
    apiserver = ssl.create_default_context(cafile=str(cluster.ca_cert))
    pki_dir = cluster.ca_cert.parent
    apiserver.load_cert_chain(
        str(pki_dir / "apiserver-kubelet-client.crt"), str(pki_dir / "apiserver-kubelet-client.key")
    )
    token = await service_account_token(node, namespace, "nobody")
    path = f"/containerLogs/{namespace}/web/server"
    await run_pod(node, namespace)
    async with httpx.AsyncClient(base_url=node.kubelet_url, verify=ca, timeout=10) as anonymous:
        assert (await anonymous.get(path)).status_code == 401
        denied = await anonymous.get(path, headers={"Authorization": f"Bearer {token}"})
        assert denied.status_code == 403 and f"system:serviceaccount:{namespace}:nobody" in denied.text
        assert (
            await anonymous.get("/stats/summary", headers={"Authorization": f"Bearer {token}"})
        ).status_code == 403
    async with httpx.AsyncClient(base_url=node.kubelet_url, verify=apiserver, timeout=10) as trusted:
        ok = await trusted.get(path)
        assert ok.status_code == 200 and "container server started" in ok.text
    # a role with nodes/stats only: stats yes, logs (nodes/proxy) no
    await node.kube.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        body={
            "metadata": {"name": f"stats-{namespace}"},
            "rules": [{"apiGroups": [""], "resources": ["nodes/stats"], "verbs": ["get"]}],
        },
    )
    await node.kube.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        body={
            "metadata": {"name": f"stats-{namespace}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"stats-{namespace}",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}],
        },
    )
    try:
        async with httpx.AsyncClient(base_url=node.kubelet_url, verify=ca, timeout=10) as client:
            auth = {"Authorization": f"Bearer {token}"}
            stats = await eventually(
                lambda: _status_is(client, "/stats/summary", auth, 200),
                timeout=60,  # denials cache 30 s
            )
            assert stats
            assert (await client.get(path, headers=auth)).status_code == 403
    finally:
        for kind in ("clusterrolebindings", "clusterroles"):
            await node.kube.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{kind}/stats-{namespace}")
    assert token not in caplog.text and token[-20:] not in caplog.text


async def _status_is(client: httpx.AsyncClient, path: str, headers: dict[str, str], status: int) -> bool:
    return (await client.get(path, headers=headers)).status_code == status


async def test_admin_api_beyond_loopback_needs_an_authorized_caller(node: Node, namespace: str) -> None:
    """The service binds the admin API on 0.0.0.0 (config), reached here through 127.0.0.1."""
    token = await service_account_token(node, namespace, "viewer")
    async with httpx.AsyncClient(base_url=node.admin_url, timeout=10) as admin:
        assert (await admin.get("/healthz")).status_code == 200
        assert (await admin.get("/metrics")).status_code == 200
        assert (await admin.get("/state")).status_code == 401
        assert (await admin.post("/explain", json={})).status_code == 401
        denied = await admin.get("/placement", headers={"Authorization": f"Bearer {token}"})
        assert denied.status_code == 403 and "nodes" in denied.text


def test_kubelet_networks_are_distinct_and_removed_without_a_trace() -> None:
    from vkprovider.devcluster.netns import KubeletNet, NetnsError

    try:
        first = KubeletNet.create(f"t-{uuid.uuid4().hex[:6]}")
    except NetnsError as exc:
        pytest.skip(f"ip netns not allowed here: {exc}")
    second = KubeletNet.create(f"t-{uuid.uuid4().hex[:6]}")
    try:
        assert first.host_ip != second.host_ip and first.host_ip.startswith("198.1")
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert first.netns in listed and second.netns in listed
        inside = subprocess.run(
            ["ip", "-n", first.netns, "-4", "-o", "addr"], capture_output=True, text=True, check=True
        ).stdout
        assert f"{first.ns_ip}/30" in inside
    finally:
        first.remove()
        second.remove()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert first.netns not in listed and second.netns not in listed
    assert f"{first.host_link}@" not in links and f"{second.host_link}@" not in links


async def test_serving_certificate_from_a_kubelet_serving_csr(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """``kubelet.csr``: the service asks for its serving cert; ``vkprovider approve-csr`` approves
    it (the node's name, SANs and requester checked), the controller-manager signs it, the service
    serves with it and the apiserver (which verifies it) proxies to it. Restarted with the same
    ``cert_dir``, the service serves again with the same pair and posts no new CSR."""
    net = cluster.kubelet_net
    if net is None:
        pytest.skip("no kubelet network namespace")
    name, port = f"vk-{uuid.uuid4().hex[:8]}", free_port()
    cloud = parse_config({"provider": "c", "catalog": [{"gpu_type": "H100-SXM-80GB", "price_per_hour": 1.0}]})
    async with running_fakecloud(cloud) as server:
        settings = Settings(
            node={"name": name, "internal_ip": net.host_ip, "kubelet_port": port},
            kube={"kubeconfig": str(cluster.kubeconfig)},
            pods={"drain_timeout_seconds": 1},
            http={"admin_port": 0},
            kubelet={
                "csr": True,
                "client_ca_file": str(cluster.ca_cert),
                "cert_dir": str(tmp_path / "certs"),
            },
            providers=[{"name": "c", "adapter": "fakecloud", "settings": {"url": server.url}}],
        )
        async with cluster.http() as admin:

            async def csrs() -> list[JSON]:
                resp = await admin.get(
                    "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                    params={"labelSelector": f"vkprovider.io/node-name={name}"},
                )
                items: list[JSON] = resp.json()["items"]
                return items

            async def pending_csr() -> JSON | None:
                items = await csrs()
                return items[0] if items else None

            for run in ("first start", "restart"):
                service = Service(settings)
                task = asyncio.create_task(service.run())
                try:
                    if run == "first start":
                        csr = await eventually(pending_csr, timeout=60)
                        assert csr["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
                        assert service.kubelet is None  # nothing served before the certificate exists
                        # A wrong requester is left pending; the service's own is approved.
                        approve = ["approve-csr", "--kubeconfig", str(cluster.kubeconfig), "--node", name]
                        approve += ["--pod-selector", "app=none", "--ip", net.host_ip]
                        assert await asyncio.to_thread(main, [*approve, "--requester", "someone-else"]) == 1
                        requester = ["--requester", csr["spec"]["username"]]
                        assert await asyncio.to_thread(main, [*approve, *requester]) == 0

                    async def serving(service: Service = service, task: asyncio.Task[None] = task) -> bool:
                        if task.done():
                            task.result()
                        return service.kubelet is not None

                    await eventually(serving, timeout=60)
                    verified = ssl.create_default_context(cafile=str(cluster.ca_cert))
                    async with httpx.AsyncClient(
                        base_url=f"https://{net.host_ip}:{port}", verify=verified
                    ) as c:
                        assert (await c.get("/healthz")).status_code == 401  # TLS verified; no credentials
                    proxied = await kubectl(cluster, "get", "--raw", f"/api/v1/nodes/{name}/proxy/healthz")
                    assert proxied.returncode == 0 and proxied.stdout.strip() == "ok", proxied.stderr
                finally:
                    service.stopping.set()
                    await asyncio.wait_for(task, 30)
            assert len(await csrs()) == 1  # the restart reused the pair in cert_dir
