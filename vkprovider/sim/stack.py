"""Everything a scenario runs on, started as real processes and stopped by PID.

The local control plane (devcluster) with the scenario's kwok nodes (and real Kueue with
deploy/kueue's objects when training goes through it), one ``vkprovider fakecloud`` process per
provider, ``vkprovider serve`` (with the gate when this build has one, the quota sync with
Kueue, and the kubelet API on the cluster's network-namespace address), metrics-server, and the
Descheduler running the shipped ``deploy/descheduler/policy.yaml`` as it is (when the dev cluster
can start one). The demo is the product as a user would run it: ``kubectl logs``, ``kubectl top``,
the node proxy and a Deployment in any namespace coming home all work. Processes run in their own
sessions, so ``make demo`` can exit and leave them running; their PIDs go to a state file that
``down`` reads.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from vkprovider.devcluster import Cluster, StartupError, kwok, metrics_server
from vkprovider.devcluster.build import BuildError
from vkprovider.devcluster.cluster import run_root
from vkprovider.devcluster.datapath import provider_range, why_unavailable
from vkprovider.devcluster.process import Process, ensure_port_free, free_port, spawn
from vkprovider.sim import kueue, manifests
from vkprovider.sim.local import fakecloud_module
from vkprovider.sim.scenario import Scenario
from vkprovider.sim.service_config import (
    GATE_TAINT_KEY,
    VIRTUAL_NODE,
    KubeletEndpoint,
    gate_supported,
    serve_config,
)
from vkprovider.traffic.config import ZONE_LABEL

STATE_FILE = "demo-state.json"
#: metrics-server's scrape interval: its minimum (the day is compressed; HPAs see fresher figures)
METRICS_RESOLUTION_SECONDS = 10


def _quiet(message: str) -> None:
    del message


def state_path(cluster_name: str) -> Path:
    return run_root() / cluster_name / STATE_FILE


def pod_delays_supported() -> bool:
    """Whether this dev cluster can run kwok with stage delays (slow Ready, long-running Jobs)."""
    return "pod_delays" in inspect.signature(Cluster.start).parameters


def descheduler_module() -> Any | None:
    """``vkprovider.devcluster.descheduler`` where this build has it (the return path)."""
    try:
        return importlib.import_module("vkprovider.devcluster.descheduler")
    except ImportError:
        return None


def node_names(s: Scenario) -> list[str]:
    return [f"local-gpu-{i}" for i in range(s.fleet.nodes)]


async def wait_http(url: str, what: str, proc: Process, timeout: float = 60.0) -> None:
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
            await asyncio.sleep(0.25)
    raise StartupError(f"{what} did not answer on {url} within {timeout:.0f}s; log: {proc.log}")


@dataclass
class Stack:
    cluster: Cluster
    clouds: dict[str, str]  #: provider -> base URL
    admin_url: str
    processes: list[Process] = field(default_factory=list)
    gate: bool = False
    descheduler: bool = False
    pod_delays: bool = False  #: kwok honours stage delays: real training Jobs, slow local Ready
    kueue: bool = False  #: real Kueue admits training; serve runs the quota sync on its leader
    kubelet_url: str = ""  #: the virtual node's kubelet API (empty: none, no netns address)
    metrics_server: bool = False
    virtual_node: str = VIRTUAL_NODE
    gate_taint_key: str = GATE_TAINT_KEY
    notes: list[str] = field(default_factory=list)  #: what did not start, for the report

    @property
    def logs(self) -> Path:
        return self.cluster.workdir / "logs"

    def save(self) -> None:
        data = {
            "processes": [p.to_json() for p in self.processes],
            "clouds": self.clouds,
            "admin_url": self.admin_url,
            "gate": self.gate,
            "descheduler": self.descheduler,
            "kueue": self.kueue,
            "kubelet_url": self.kubelet_url,
            "metrics_server": self.metrics_server,
        }
        state_path(self.cluster.name).write_text(json.dumps(data, indent=1))

    @classmethod
    async def up(
        cls,
        s: Scenario,
        *,
        cluster_name: str,
        admin_port: int | None = None,
        say: Callable[[str], None] = _quiet,
    ) -> Stack:
        await down(cluster_name)
        if admin_port:
            ensure_port_free(admin_port, "vkprovider serve admin API")
        say(f"starting the local control plane with {s.fleet.nodes} kwok GPU nodes ...")
        options: dict[str, Any] = {"pod_delays": True} if pod_delays_supported() else {}
        if s.training.kueue:
            say("... with real Kueue (training goes through its LocalQueue)")
            options["kueue"] = True
        cluster = await Cluster.start(cluster_name, gpu_nodes=0, **options)
        stack = cls(cluster, {}, "", pod_delays=bool(options), kueue=s.training.kueue)
        try:
            await stack._nodes(s)
            await stack._datapath(s, say)
            if stack.kueue:
                await stack._kueue_objects(say)
            await stack._clouds(s, say)
            await stack._serve(s, admin_port or free_port(), say)
            await stack._metrics_server(say)
            await stack._descheduler(s, say)
        except BaseException:
            await stack.down()
            raise
        return stack

    async def _nodes(self, s: Scenario) -> None:
        async with self.cluster.http() as client:
            for name in node_names(s):
                await kwok.create_node(client, name, s.fleet.gpus_per_node)
                # a zone, as a cloud cluster's nodes have: a Service with PreferSameZone is honoured
                resp = await client.patch(
                    f"/api/v1/nodes/{name}",
                    json={"metadata": {"labels": {ZONE_LABEL: manifests.LOCAL_ZONE}}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                if resp.status_code != 200:
                    raise StartupError(
                        f"labelling node {name} with its zone: {resp.status_code} {resp.text[:300]}"
                    )
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                resp = await client.get("/api/v1/nodes", params={"labelSelector": kwok.GPU_POOL_SELECTOR})
                ready = {
                    n["metadata"]["name"]
                    for n in resp.json()["items"]
                    for c in n.get("status", {}).get("conditions", [])
                    if c["type"] == "Ready" and c["status"] == "True"
                }
                if set(node_names(s)) <= ready:
                    return
                await asyncio.sleep(0.25)
        raise StartupError(f"kwok nodes did not become Ready; logs in {self.logs}")

    async def _kueue_objects(self, say: Callable[[str], None]) -> None:
        """deploy/kueue's objects, before serve (its quota sync needs the ClusterQueue)."""
        objects = kueue.deploy_objects()
        async with self.cluster.http() as client:
            for obj in objects:
                path = manifests.collection_path(obj)
                resp = await client.post(path, json=obj)
                if resp.status_code not in (201, 409):
                    name = f"{obj['kind']} {obj['metadata']['name']}"
                    raise StartupError(f"applying deploy/kueue {name}: {resp.status_code} {resp.text[:300]}")
        kinds = ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in objects if o["kind"] != "Namespace")
        say(f"applied deploy/kueue: {kinds}")

    async def _datapath(self, s: Scenario, say: Callable[[str], None]) -> None:
        """kube-proxy and the replicas' listeners (devcluster.datapath), so the scenario's
        Services carry real requests; a machine without network namespaces gets a note."""
        reason = await asyncio.to_thread(why_unavailable) if node_names(s) else "no local node"
        if reason is None:
            try:
                net = await self.cluster.start_datapath(node_names(s)[0])
            except StartupError as exc:
                reason = str(exc)
            else:
                say(f"data path: kube-proxy (nftables) in {net.node}, replicas in {net.backends}")
                return
        self.notes.append(f"data path: not started ({reason}); Services carry no requests")

    async def _clouds(self, s: Scenario, say: Callable[[str], None]) -> None:
        config_dir = self.cluster.workdir / "sim"
        config_dir.mkdir(exist_ok=True)
        fields = fakecloud_module("config").FakeCloudConfig.model_fields
        for i, p in enumerate(s.providers):
            config = manifests.fakecloud_config(s, p)
            if "ip_range" in fields:
                config["ip_range"] = provider_range(i)  # each its own, in the data path's plan
            net = self.cluster.datapath
            if net is not None and "serve_netns" in fields:
                config["serve_netns"] = net.backends  # its deployments answer requests
                if config.get("knobs", {}).get("routable", True):
                    await asyncio.to_thread(net.route, config["ip_range"])
            path = config_dir / f"fakecloud-{p.name}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            port = free_port()
            args = ["-m", "vkprovider", "fakecloud", "--port", str(port), "--config", str(path)]
            proc = spawn(f"fakecloud-{p.name}", Path(sys.executable), args, self.logs)
            self.processes.append(proc)
            self.save()
            url = f"http://127.0.0.1:{port}"
            await wait_http(f"{url}/v1/health", f"fakecloud {p.name}", proc)
            self.clouds[p.name] = url
            say(
                f"provider {p.name} (fakecloud) on {url}: {p.capacity} x {p.gpus} GPU at {p.price_per_hour:.2f}/h"
            )
        self.save()

    def _kubelet_endpoint(self) -> KubeletEndpoint | None:
        """The kubelet API on the cluster's namespace address, or None (and a note) without one."""
        net, serving = self.cluster.kubelet_net, self.cluster.kubelet_serving
        if net is None or serving is None:
            self.notes.append(
                "kubelet API: the dev cluster has no network-namespace address (ip netns needs root), "
                "so kubectl logs, kubectl top and the node proxy do not reach the virtual node"
            )
            return None
        return KubeletEndpoint(net.host_ip, free_port(), serving.cert, serving.key, self.cluster.ca_cert)

    async def _serve(self, s: Scenario, admin_port: int, say: Callable[[str], None]) -> None:
        path = self.cluster.workdir / "sim" / "serve.yaml"
        kubelet = self._kubelet_endpoint()
        config = serve_config(s, self.clouds, self.cluster.kubeconfig, admin_port, self.virtual_node, kubelet)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        proc = spawn(
            "vkprovider-serve",
            Path(sys.executable),
            ["-m", "vkprovider", "serve", "--config", str(path)],
            self.logs,
        )
        self.processes.append(proc)
        self.admin_url = f"http://127.0.0.1:{admin_port}"
        self.gate = gate_supported()
        self.save()
        await wait_http(f"{self.admin_url}/readyz", "vkprovider serve", proc, timeout=90)
        if kubelet is not None:
            self.kubelet_url = f"https://{kubelet.ip}:{kubelet.port}"
            self.save()
        say(
            f"vkprovider serve ready (virtual node {self.virtual_node}, gate {'on' if self.gate else 'not available'}, "
            f"kubelet API {self.kubelet_url or 'not served'})"
        )

    async def _metrics_server(self, say: Callable[[str], None]) -> None:
        """metrics-server on the namespace address, for ``kubectl top`` and the HPAs; without it
        the day still runs (the HPAs then hold their bounds), and the report says why."""
        if not self.kubelet_url:
            self.notes.append("metrics-server: not started (it needs the kubelet API's namespace address)")
            return
        if not metrics_server.binary_path().exists():
            say(f"building metrics-server {metrics_server.METRICS_SERVER_VERSION} once (a few minutes) ...")
        try:
            url = await metrics_server.start(self.cluster, resolution_seconds=METRICS_RESOLUTION_SECONDS)
        except (StartupError, BuildError) as exc:
            self.notes.append(f"metrics-server: could not start: {str(exc).splitlines()[0]}")
            say(f"metrics-server: could not start ({exc}); HPAs will hold their bounds")
            return
        self.metrics_server = True
        self.save()
        say(f"metrics-server on {url} (every {METRICS_RESOLUTION_SECONDS}s): kubectl top, HPAs")

    async def _descheduler(self, s: Scenario, say: Callable[[str], None]) -> None:
        module = descheduler_module()
        if module is None:
            say("descheduler: not in this build (nothing will bring external replicas home)")
            return
        # The shipped policy itself, every plugin and cap as it is (what we ship is what runs),
        # with one time-valued field on the simulated clock: the shipped minPodAge (2m of real
        # time) would be hours of a compressed day, longer than quick.yaml's whole run.
        policy = module.shipped_policy(min_pod_age="1s")
        try:
            proc = await module.start_descheduler(
                self.cluster, policy, interval_seconds=s.runtime.descheduler_interval_seconds
            )
        except StartupError as exc:  # e.g. not built yet: run without a return path, and say so
            self.notes.append(f"descheduler: could not start: {str(exc).splitlines()[0]}")
            say(f"descheduler: could not start ({exc}); running without it")
            return
        self.cluster.processes.remove(proc)  # ours to stop, before the control plane
        self.cluster.save()
        self.processes.append(proc)
        self.descheduler = True
        self.save()
        say(
            f"descheduler running {module.POLICY_FILE} (minPodAge 1s) every "
            f"{s.runtime.descheduler_interval_seconds:g}s"
        )

    async def down(self) -> None:
        for proc in reversed(self.processes):
            await asyncio.to_thread(proc.stop)
        self.processes.clear()
        state_path(self.cluster.name).unlink(missing_ok=True)
        await self.cluster.stop()


async def down(cluster_name: str) -> bool:
    """Stop what a previous ``up`` of this cluster left running, by PID; True if anything was."""
    found = False
    state = state_path(cluster_name)
    if state.exists():
        found = True
        for data in reversed(json.loads(state.read_text()).get("processes", [])):
            await asyncio.to_thread(Process.from_json(data).stop)
        state.unlink()
    cluster = Cluster.load(run_root() / cluster_name)
    if cluster is not None:
        found = True
        await cluster.stop()
    return found
