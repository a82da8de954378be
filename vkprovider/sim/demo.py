"""``make demo``: the whole flow on a real local control plane with two fakecloud providers.

``up`` starts the control plane, two fakecloud servers (cheap and premium), then
``vkprovider serve --config deploy/examples/demo-config.yaml``; applies
``deploy/examples/inference.yaml`` and prints pod -> provider -> price -> phase as the pods come
up. Everything stays running; the last line is ``export KUBECONFIG=... PATH=...`` (as
``make cluster-up`` prints). ``down`` stops it all by PID. Progress goes to stderr, the export
line to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from vkprovider.devcluster import Cluster, StartupError
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.cluster import run_root
from vkprovider.devcluster.process import Process, ensure_port_free, spawn
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeConflict

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "examples"
CLUSTER_NAME = "demo"
CLOUDS = {"fakecloud-cheap": 18081, "fakecloud-premium": 18082}
ADMIN_PORT = 10255


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _state_file() -> Path:
    return run_root() / CLUSTER_NAME / "demo-state.json"


async def _wait_http(url: str, what: str, proc: Process, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if not proc.alive():
                raise StartupError(proc.exit_reason())
            try:
                if (await client.get(url)).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise StartupError(f"{what} did not answer on {url} within {timeout:.0f}s; log: {proc.log}")


async def _apply(kube: KubeClient, manifest: dict[str, Any], namespace: str = "default") -> None:
    try:
        await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=manifest)
    except KubeConflict:
        name = manifest["metadata"]["name"]
        await kube.request("PUT", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", body=manifest)


def _row(pod: dict[str, Any], prices: dict[tuple[str, str], float]) -> tuple[str, str, str, str]:
    annotations = pod["metadata"].get("annotations") or {}
    provider = annotations.get("vkprovider.io/provider", "-")
    offer = annotations.get("vkprovider.io/offer", "")
    price = prices.get((provider, offer))
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])
    phase = pod["status"].get("phase", "?") + (" (Ready)" if ready else "")
    return pod["metadata"]["name"], provider, f"{price:.2f}/h" if price is not None else "-", phase


async def _offer_prices() -> dict[tuple[str, str], float]:
    prices: dict[tuple[str, str], float] = {}
    async with httpx.AsyncClient(timeout=5.0) as client:
        for name, port in CLOUDS.items():
            resp = await client.get(f"http://127.0.0.1:{port}/v1/offers")
            resp.raise_for_status()
            for offer in resp.json():
                prices[(name, str(offer["offer_id"]))] = float(offer["price_per_hour"])
    return prices


async def _watch_table(kube: KubeClient, replicas: int, timeout: float = 180.0) -> bool:
    prices = await _offer_prices()
    last: list[tuple[str, str, str, str]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = await kube.request(
            "GET", "/api/v1/namespaces/default/pods", query={"labelSelector": "app=inference"}
        )
        rows = sorted(_row(p, prices) for p in body["items"])
        if rows != last:
            _say(f"\n{'POD':<34} {'PROVIDER':<20} {'PRICE':<9} PHASE")
            for row in rows:
                _say(f"{row[0]:<34} {row[1]:<20} {row[2]:<9} {row[3]}")
            last = rows
        if sum(r[3] == "Running (Ready)" for r in rows) >= replicas:
            return True
        await asyncio.sleep(1.0)
    return False


async def up() -> int:
    cluster_dir = run_root() / CLUSTER_NAME
    await down(quiet=True)
    for name, port in {**CLOUDS, "admin": ADMIN_PORT}.items():
        ensure_port_free(port, name)
    _say("starting the local control plane ...")
    cluster = await Cluster.start(CLUSTER_NAME, gpu_nodes=2)
    logs = cluster_dir / "logs"
    procs: list[Process] = []
    try:
        for name, port in CLOUDS.items():
            config = EXAMPLES / f"{name}.yaml"
            proc = spawn(
                name,
                Path(sys.executable),
                ["-m", "vkprovider", "fakecloud", "--port", str(port), "--config", str(config)],
                logs,
            )
            procs.append(proc)
            await _wait_http(f"http://127.0.0.1:{port}/v1/health", name, proc)
            _say(f"{name} serving on http://127.0.0.1:{port}")
        serve = spawn(
            "vkprovider-serve",
            Path(sys.executable),
            ["-m", "vkprovider", "serve", "--config", str(EXAMPLES / "demo-config.yaml")],
            logs,
            env={"VKPROVIDER_KUBE__KUBECONFIG": str(cluster.kubeconfig)},
        )
        procs.append(serve)
        await _wait_http(f"http://127.0.0.1:{ADMIN_PORT}/readyz", "vkprovider serve", serve, timeout=90)
        _say("vkprovider serve is ready (virtual node vk-external)")
    finally:
        _state_file().write_text(json.dumps({"processes": [p.to_json() for p in procs]}))

    kube = await KubeClient.connect(str(cluster.kubeconfig))
    try:
        manifest = yaml.safe_load((EXAMPLES / "inference.yaml").read_text())
        await _apply(kube, manifest)
        _say("applied deploy/examples/inference.yaml (4 replicas, 1 H100 each)")
        done = await _watch_table(kube, int(manifest["spec"]["replicas"]))
    finally:
        await kube.close()
    _say(
        "\nall replicas Running and Ready"
        if done
        else "\nnot every replica became Ready in time; see the logs"
    )
    _say(f"logs: {logs}   admin API: http://127.0.0.1:{ADMIN_PORT}/state   stop with: make demo-down")
    # The same line as `make cluster-up`: kubectl is the pinned v1.36 client, not the machine's.
    print(f"export KUBECONFIG={cluster.kubeconfig} PATH={Toolchain.default().bin_dir}:$PATH")
    return 0 if done else 1


async def down(*, quiet: bool = False) -> int:
    state = _state_file()
    if state.exists():
        for data in reversed(json.loads(state.read_text()).get("processes", [])):
            await asyncio.to_thread(Process.from_json(data).stop)
        state.unlink()
    cluster = Cluster.load(run_root() / CLUSTER_NAME)
    if cluster is not None:
        await cluster.stop()
    if not quiet:
        _say("demo stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkprovider.sim.demo")
    parser.add_argument("command", choices=["up", "down"])
    args = parser.parse_args(argv)
    try:
        return asyncio.run(up() if args.command == "up" else down())
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
