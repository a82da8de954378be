"""metrics-server for the dev cluster, on request: ``kubectl top`` and HPAs on the virtual node.

Built once from the Go module proxy at a pinned version into the shared cache
(``~/.cache/vkprovider/metrics-server/<version>/bin``), smoke-tested, then renamed into place.
It runs on the host, bound to the cluster's kubelet-network address (the aggregator, like the
node proxy, refuses loopback), behind a selector-less Service ``kube-system/metrics-server``
whose Endpoints name that address (the apiserver runs with ``--enable-aggregator-routing``),
and the ``v1beta1.metrics.k8s.io`` APIService trusting the cluster CA. It scrapes each node's
``/metrics/resource`` at the advertised InternalIP and kubelet port with the admin credentials
(kwok nodes have no kubelet: they just have no metrics). ``Cluster.stop()`` stops it like any
other component.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
from pathlib import Path

import httpx

from vkprovider.devcluster.build import BuildError
from vkprovider.devcluster.cluster import Cluster
from vkprovider.devcluster.process import StartupError, free_port, spawn

METRICS_SERVER_VERSION = "v0.8.0"
MODULE = "sigs.k8s.io/metrics-server/cmd/metrics-server"


def binary_path() -> Path:
    base = os.environ.get("VKPROVIDER_CACHE") or str(Path.home() / ".cache" / "vkprovider")
    return Path(base) / "metrics-server" / METRICS_SERVER_VERSION / "bin" / "metrics-server"


def build() -> Path:
    """``go install`` the pinned version (GOFLAGS/GOPROXY from the environment), once."""
    target = binary_path()
    if os.access(target, os.X_OK):
        return target
    staging = target.parent.with_name("bin.tmp")
    staging.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["go", "install", "-ldflags", "-s -w", f"{MODULE}@{METRICS_SERVER_VERSION}"],
        env={**os.environ, "GOBIN": str(staging)},
        capture_output=True,
        text=True,
        check=False,
    )
    built = staging / "metrics-server"
    if done.returncode != 0 or not built.exists():
        raise BuildError(f"building metrics-server {METRICS_SERVER_VERSION} failed: {done.stderr[-2000:]}")
    smoke = subprocess.run([str(built), "--version"], capture_output=True, text=True, check=False, timeout=30)
    if smoke.returncode != 0:
        raise BuildError(f"metrics-server --version failed: {smoke.stderr[-500:]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    built.rename(target)
    return target


def _objects(address: str, port: int, ca_pem: bytes) -> list[tuple[str, str, dict[str, object]]]:
    """(collection URL, name, body) for the Service, its Endpoints and the APIService."""
    meta = {"name": "metrics-server", "namespace": "kube-system"}
    return [
        (
            "/api/v1/namespaces/kube-system/services",
            "metrics-server",
            {"metadata": meta, "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        ),
        (
            "/api/v1/namespaces/kube-system/endpoints",
            "metrics-server",
            {
                "metadata": meta,
                "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port}]}],
            },
        ),
        (
            "/apis/apiregistration.k8s.io/v1/apiservices",
            "v1beta1.metrics.k8s.io",
            {
                "metadata": {"name": "v1beta1.metrics.k8s.io"},
                "spec": {
                    "group": "metrics.k8s.io",
                    "version": "v1beta1",
                    "service": {"name": "metrics-server", "namespace": "kube-system", "port": 443},
                    "caBundle": base64.b64encode(ca_pem).decode(),
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                },
            },
        ),
    ]


async def start(cluster: Cluster, *, resolution_seconds: int = 15) -> str:
    """Start metrics-server for ``cluster``; returns its URL."""
    if cluster.kubelet_net is None:
        raise StartupError("metrics-server needs the cluster's kubelet network namespace (ip netns)")
    binary = await asyncio.to_thread(build)
    address, port = cluster.kubelet_net.host_ip, free_port()
    pki = cluster.workdir / "pki"
    args = [
        f"--kubeconfig={cluster.kubeconfig}",
        f"--authentication-kubeconfig={cluster.kubeconfig}",
        f"--authorization-kubeconfig={cluster.kubeconfig}",
        f"--bind-address={address}",
        f"--secure-port={port}",
        f"--tls-cert-file={pki / 'metrics-server.crt'}",
        f"--tls-private-key-file={pki / 'metrics-server.key'}",
        f"--kubelet-certificate-authority={cluster.ca_cert}",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        f"--metric-resolution={resolution_seconds}s",
        # it refuses a resolution under 10/9 of the request timeout (default 10 s)
        f"--kubelet-request-timeout={min(10, resolution_seconds * 9 // 10)}s",
        "--v=1",
    ]
    process = spawn("metrics-server", binary, args, cluster.workdir / "logs")
    cluster.processes.append(process)
    cluster.save()
    await asyncio.sleep(2)  # a bad flag ends it at once: say so here, not as an unavailable API
    if not process.alive():
        raise StartupError(process.exit_reason())
    async with cluster.http() as client:
        for collection, name, body in _objects(address, port, cluster.ca_cert.read_bytes()):
            await client.delete(f"{collection}/{name}")
            resp = await client.post(collection, json=body)
            if resp.status_code >= 400:
                raise StartupError(f"metrics-server: creating {collection}/{name}: {resp.text[:300]}")
    return f"https://{address}:{port}"


async def available(client: httpx.AsyncClient) -> bool:
    """True once the aggregator reports the APIService Available."""
    resp = await client.get("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io")
    if resp.status_code != 200:
        return False
    conditions = resp.json().get("status", {}).get("conditions", [])
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
