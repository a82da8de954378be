"""Run real Kueue against the local control plane, on request (``Cluster.start(kueue=True)``).

What this does, and why each part runs the way it does:

- CRDs are read at run time from the kueue module in the Go module cache (never copied into
  the repository) and created before the manager starts.
- Webhooks: the manager serves them on 127.0.0.1 with a serving cert from a CA of our own; the
  Mutating/ValidatingWebhookConfigurations are rewritten to ``clientConfig.url`` (no Service, no
  cluster DNS) and registered only once the manager is ready, and only for Kueue's own kinds and
  ``batch/v1`` Jobs — the integration enabled here — so no pod creation depends on Kueue.
- Internal cert management is off (it rotates certs for a Service DNS name the apiserver cannot
  reach here). Kueue v0.17 then reads its *metrics* serving cert from the hard-coded path
  ``/etc/kueue/metrics/certs``; the manager therefore runs in a private mount namespace
  (``unshare``, as root) with an overlay over ``/etc`` that holds the cert, so nothing is written
  to the real ``/etc`` and two clusters never share it.
- The visibility server is off (``VisibilityOnDemand=false``): it is an aggregated APIService,
  and the apiserver will not proxy to a loopback address.
- Leader election is off (one manager per dev cluster).
- Training pods run as long as their Job says: the cluster's one kwok stage set
  (``kwok.POD_STAGES``) completes a Job pod ``kwok.COMPLETE_DELAY_ANNOTATION`` after it starts.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from vkprovider.devcluster import pki
from vkprovider.devcluster.handle import ClusterHandle
from vkprovider.devcluster.kueue_build import KueueToolchain
from vkprovider.devcluster.process import StartupError, free_port, spawn

KUEUE_NAMESPACE = "kueue-system"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WEBHOOK_API = "/apis/admissionregistration.k8s.io/v1"
_APPLY_SECONDS = 120.0
_METRICS_CERTS = "/etc/kueue/metrics/certs"
#: Webhook paths kept: Kueue's own kinds and the batch/v1 Job integration.
_KEEP_WEBHOOK = ("kueue-x-k8s-io", "batch-v1-job")


def manager_config(webhook_port: int, health_port: int, metrics_port: int, cert_dir: Path) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def webhook_configurations(module_dir: Path, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Upstream webhook manifests, filtered, with each Service reference turned into a URL."""
    docs = yaml.safe_load_all((module_dir / "config/components/webhook/manifests.yaml").read_text())
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in docs:
        if not doc:
            continue
        kept = []
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if any(marker in path for marker in _KEEP_WEBHOOK):
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
                kept.append(hook)
        doc["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        doc["webhooks"] = kept
        out.append(doc)
    return out


def crds(module_dir: Path) -> list[dict[str, Any]]:
    bases = module_dir / "config/components/crd/bases"
    return [yaml.safe_load(path.read_text()) for path in sorted(bases.glob("*.yaml"))]


def _wrapped(binary: Path, args: list[str], run: Path, cert_dir: Path) -> tuple[Path, list[str]]:
    """``unshare`` + overlay on /etc, so the manager finds its metrics cert at the fixed path."""
    upper, work = run / "etc-upper", run / "etc-work"
    upper.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    script = (
        f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
        f" && mkdir -p {_METRICS_CERTS} && cp {cert_dir}/tls.crt {cert_dir}/tls.key {_METRICS_CERTS}/"
        ' && exec "$@"'
    )
    return Path("/usr/bin/unshare"), [
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "kueue",
        str(binary),
        *args,
    ]


async def _apply(client: httpx.AsyncClient, path: str, obj: dict[str, Any]) -> None:
    # CRDs are large and a loaded apiserver takes a while to store and index them
    resp = await client.post(path, json=obj, timeout=_APPLY_SECONDS)
    if resp.status_code == 409:
        name = obj["metadata"]["name"]
        current = await client.get(f"{path}/{name}", timeout=_APPLY_SECONDS)
        obj["metadata"]["resourceVersion"] = current.json()["metadata"]["resourceVersion"]
        resp = await client.put(f"{path}/{name}", json=obj, timeout=_APPLY_SECONDS)
    if resp.status_code >= 300:
        raise StartupError(f"applying {obj.get('kind')} {obj['metadata']['name']}: {resp.text[:300]}")


async def _established(client: httpx.AsyncClient, names: list[str]) -> bool:
    for name in names:
        resp = await client.get(f"{CRD_PATH}/{name}")
        status = (resp.json().get("status") or {}) if resp.status_code == 200 else {}
        conditions = status.get("conditions") or []
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
    return True


async def start_kueue(cluster: ClusterHandle, toolchain: KueueToolchain | None = None) -> None:
    """Install the CRDs, start the manager, wait until it is ready, then register its webhooks."""
    toolchain = toolchain or KueueToolchain.default()
    if toolchain.missing():
        raise StartupError(f"kueue binary missing at {toolchain.binary}; run `make cluster-build` first")
    module_dir = await asyncio.to_thread(toolchain.module_dir)
    run = cluster.workdir / "kueue"
    cert_dir = run / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = pki.CertificateAuthority.create(cert_dir, name="vkprovider-kueue-webhook-ca")
    ca.issue(cert_dir, "tls", "kueue-webhook", server=True, ip_addresses=("127.0.0.1",))
    webhook_port, health_port, metrics_port = free_port(), free_port(), free_port()
    config = run / "config.yaml"
    config.write_text(yaml.safe_dump(manager_config(webhook_port, health_port, metrics_port, cert_dir)))

    async with cluster.http() as client:
        await _apply(client, "/api/v1/namespaces", _namespace())
        definitions = crds(module_dir)
        for crd in definitions:
            await _apply(client, CRD_PATH, crd)
        names = [crd["metadata"]["name"] for crd in definitions]
        await _until(cluster, lambda: _established(client, names), "Kueue CRDs Established")

        binary, args = _wrapped(
            toolchain.binary,
            [f"--config={config}", f"--kubeconfig={cluster.kubeconfig}", "--zap-log-level=info"],
            run,
            cert_dir,
        )
        proc = spawn("kueue", binary, args, cluster.workdir / "logs")
        # after the exec through unshare and sh, /proc shows the kueue binary as argv0
        cluster.processes.append(dataclasses.replace(proc, binary=str(toolchain.binary)))
        cluster.save()

        async def ready() -> bool:
            try:
                async with httpx.AsyncClient(timeout=2.0) as probe:
                    return (await probe.get(f"http://127.0.0.1:{health_port}/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        await _until(cluster, ready, "Kueue manager ready")
        for hooks in webhook_configurations(module_dir, webhook_port, ca.pair.cert.read_bytes()):
            plural = hooks["kind"].lower() + "s"
            await _apply(client, f"{WEBHOOK_API}/{plural}", hooks)
    (run / "state.json").write_text(json.dumps({"webhook_port": webhook_port, "metrics_port": metrics_port}))


def _namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}


async def _until(cluster: ClusterHandle, check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        for proc in cluster.processes:
            if not proc.alive():
                raise StartupError(proc.exit_reason())
        if time.monotonic() > deadline:
            raise StartupError(
                f"timed out after {timeout:.0f}s waiting for {what}; logs in {cluster.workdir}"
            )
        await asyncio.sleep(0.5)
