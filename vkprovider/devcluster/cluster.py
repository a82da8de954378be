"""A real local control plane: etcd, kube-apiserver, scheduler, controller-manager and kwok.

Everything listens on 127.0.0.1 on free ports, uses certificates generated per start, and
writes one log per component under the cluster's run directory. ``Cluster.start`` returns
once the apiserver is ready, the kwok "local GPU" nodes are Ready and the ``default``
ServiceAccount exists (so pods can be created at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import ssl
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx
import yaml

from vkprovider.devcluster import audit, control_plane, kube_proxy, kwok, pki
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.cluster_state import ClusterState, forget, run_root, sweep_dead_clusters
from vkprovider.devcluster.datapath import DataPath
from vkprovider.devcluster.kueue import start_kueue
from vkprovider.devcluster.netns import KubeletNet, NetnsError
from vkprovider.devcluster.process import Process, StartupError, ensure_port_free, free_port, spawn
from vkprovider.devcluster.sizing import ControlPlaneSize

# run_root and sweep_dead_clusters live in cluster_state; importable from here as before.
__all__ = ["READY_TIMEOUT_SECONDS", "Cluster", "run_root", "sweep_dead_clusters"]

READY_TIMEOUT_SECONDS = 120.0
#: kwok start-ups tried before its known start-up race fails the cluster (see _wait_kwok_nodes_ready)
KWOK_START_ATTEMPTS = 3
log = logging.getLogger(__name__)


def _kubelet_net(name: str) -> KubeletNet | None:
    """A namespace address for the kubelet API, or None (with a warning) where ``ip netns``
    is not allowed: the cluster still works, only proxying to the virtual node does not."""
    try:
        return KubeletNet.create(re.sub(r"[^a-z0-9-]", "-", name.lower())[:30])
    except NetnsError as exc:
        log.warning(
            "no kubelet network namespace (nodes/<n>/proxy and kubectl logs will not reach "
            "the virtual node): %s",
            exc,
        )
        return None


@dataclass
class Cluster:
    """A running local control plane; ``stop()`` ends every process it started, by PID."""

    name: str
    workdir: Path
    server: str
    kubeconfig: Path
    ca_cert: Path
    admin: pki.CertPair
    processes: list[Process] = field(default_factory=list)
    gpu_nodes: list[str] = field(default_factory=list)
    #: users whose requests the apiserver writes to ``audit_log`` (see ``devcluster.audit``)
    audit_users: tuple[str, ...] = ()
    #: the arguments each component was started with, so ``restart_component`` can start it again
    argv: dict[str, list[str]] = field(default_factory=dict)
    #: The virtual node's kubelet address beyond loopback (see ``netns``), and its serving cert.
    kubelet_net: KubeletNet | None = None
    kubelet_serving: pki.CertPair | None = None
    size: ControlPlaneSize = field(default_factory=ControlPlaneSize)  #: opt-in flags for many pods
    #: kube-proxy's node namespace and the replicas' namespace (``start_datapath``)
    datapath: DataPath | None = None
    #: the cluster's CA, in the process that started it (``start_datapath`` issues a cert)
    ca: pki.CertificateAuthority | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def start(
        cls,
        name: str = "dev",
        gpu_nodes: int = 2,
        workdir: Path | None = None,
        toolchain: Toolchain | None = None,
        *,
        gpus_per_node: int = kwok.GPUS_PER_NODE,
        pod_delays: bool = False,
        audit_users: tuple[str, ...] = (),
        kueue: bool = False,
        size: ControlPlaneSize | None = None,
        datapath: bool = False,
    ) -> Cluster:
        """``pod_delays``: kwok honours the stage-delay annotations in ``kwok`` (slow-to-Ready
        replicas, Job pods that run a while), for tests of the return path. ``audit_users``: the
        apiserver writes those users' requests to ``audit_log`` (``devcluster.audit``).
        ``kueue`` also starts real Kueue (see :mod:`vkprovider.devcluster.kueue`); it implies the
        same stage set (``kwok.POD_STAGES``), so Kueue-admitted Job pods run as long as their
        Job says. Both together are the same as either. ``size``: flags for many pods
        (:mod:`vkprovider.devcluster.sizing`); default: the components' own. ``datapath``: also
        :meth:`start_datapath` for the first kwok node (needs ``gpu_nodes`` >= 1)."""
        toolchain = toolchain or Toolchain.default()
        missing = toolchain.missing()
        if missing:
            raise StartupError(
                f"control-plane binaries missing ({', '.join(missing)}); run `make cluster-build` first"
            )
        workdir = workdir or run_root() / name
        sweep_dead_clusters()
        previous = cls.load(workdir)
        if previous is not None:
            await previous.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        (workdir / "pki").mkdir(parents=True)
        (workdir / "logs").mkdir()

        api_port = free_port()
        ca = pki.CertificateAuthority.create(workdir / "pki")
        cluster = cls(
            name=name,
            workdir=workdir,
            server=f"https://127.0.0.1:{api_port}",
            kubeconfig=workdir / "kubeconfig",
            ca_cert=ca.pair.cert,
            admin=ca.issue(workdir / "pki", "admin", "admin", organization="system:masters", client=True),
            audit_users=tuple(audit_users),
        )
        try:
            cluster.kubelet_net = await asyncio.to_thread(_kubelet_net, name)
            cluster.size = size or ControlPlaneSize()
            await cluster._boot(toolchain, ca, api_port, gpu_nodes, gpus_per_node, pod_delays, kueue=kueue)
            if kueue:
                await start_kueue(cluster)
            cluster.ca = ca
            if datapath:
                await cluster.start_datapath()
        except BaseException:
            await cluster.stop()
            raise
        return cluster

    async def _boot(
        self,
        tc: Toolchain,
        ca: pki.CertificateAuthority,
        api_port: int,
        gpu_nodes: int,
        gpus_per_node: int = kwok.GPUS_PER_NODE,
        pod_delays: bool = False,
        *,
        kueue: bool = False,
    ) -> None:
        logs = self.workdir / "logs"
        kubelet_ips = ("127.0.0.1",) + ((self.kubelet_net.host_ip,) if self.kubelet_net else ())
        certs = control_plane.issue_certs(ca, self.workdir / "pki", kubelet_ips)
        self.kubelet_serving = certs.kubelet_serving
        self._write_kubeconfig()

        etcd_client, etcd_peer = free_port(), free_port()
        etcd = control_plane.etcd_args(self.workdir / "etcd", etcd_client, etcd_peer, self.size)
        self._spawn(tc, "etcd", etcd, logs)
        await self._wait_http(f"http://127.0.0.1:{etcd_client}/health", "etcd")

        ensure_port_free(api_port, "kube-apiserver")
        audited = audit.apiserver_args(self.workdir, self.audit_users) if self.audit_users else []
        apiserver = control_plane.apiserver_args(etcd_client, api_port, certs, self.size, audited)
        self._spawn(tc, "kube-apiserver", apiserver, logs)
        await self._wait_http(f"{self.server}/readyz", "kube-apiserver", timeout=READY_TIMEOUT_SECONDS)

        controllers = control_plane.controller_manager_args(self.kubeconfig, free_port(), certs, self.size)
        self._spawn(tc, "kube-controller-manager", controllers, logs)
        scheduler = control_plane.scheduler_args(self.kubeconfig, free_port(), self.size)
        self._spawn(tc, "kube-scheduler", scheduler, logs)
        # one stage set for both: delays by annotation, Job pods that run as long as they say
        stages = kwok.write_pod_stages(self.workdir) if pod_delays or kueue else None
        self._spawn(tc, "kwok", kwok.args(self.kubeconfig, free_port(), stages), logs)

        self.gpu_nodes = [f"{self.name}-gpu-{i}" for i in range(gpu_nodes)]
        async with self.http() as client:
            for node in self.gpu_nodes:
                await kwok.create_node(client, node, gpus_per_node)
            await self._wait_kwok_nodes_ready(client, tc)
            await self._wait(lambda: self._default_sa(client), "default ServiceAccount")
        self.save()

    async def start_datapath(self, node: str | None = None) -> DataPath:
        """kube-proxy in a namespace standing for kwok node ``node`` (default: the first), and
        listeners for the replicas (:mod:`vkprovider.devcluster.kube_proxy`): Services then
        carry real requests. Only in the process that started the cluster (it issues a cert)."""
        node = node or (self.gpu_nodes[0] if self.gpu_nodes else None)
        if self.ca is None or node is None:
            raise StartupError("the data path needs the cluster's CA and a kwok node (start one first)")
        return await kube_proxy.start(self, self.ca, Toolchain.default(), node)

    async def stop(self, *, remove: bool = False) -> None:
        """Stop every component, newest first, by PID; safe to call twice.

        ``remove`` also deletes the run directory (etcd data, certificates, logs).
        """
        for proc in reversed(self.processes):
            await asyncio.to_thread(proc.stop)
        self.processes.clear()
        if self.kubelet_net is not None:
            await asyncio.to_thread(self.kubelet_net.remove)
            self.kubelet_net = None
        if self.datapath is not None:
            await asyncio.to_thread(self.datapath.remove)
            self.datapath = None
        forget(self.workdir)
        if remove:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ state

    def save(self) -> None:
        """Write ``state.json`` (:mod:`.cluster_state`) so another process can find and stop it."""
        ClusterState(**{f.name: getattr(self, f.name) for f in fields(ClusterState)}).save(self.workdir)

    @classmethod
    def load(cls, workdir: Path) -> Cluster | None:
        """The cluster whose state ``workdir`` holds (to stop it), or None."""
        state = ClusterState.load(workdir)
        if state is None:
            return None
        return cls(workdir=workdir, **{f.name: getattr(state, f.name) for f in fields(ClusterState)})

    @property
    def audit_log(self) -> Path | None:
        """The apiserver's JSON audit log, when started with ``audit_users``."""
        return self.workdir / audit.LOG_FILE if self.audit_users else None

    def running(self) -> bool:
        return bool(self.processes) and all(p.alive() for p in self.processes)

    # ------------------------------------------------------------------ helpers

    def http(self) -> httpx.AsyncClient:
        """An admin HTTP client for the apiserver (used by the tooling, not by the service)."""
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        return httpx.AsyncClient(base_url=self.server, verify=context, timeout=10.0)

    def _spawn(self, tc: Toolchain, name: str, args: list[str], logs: Path) -> None:
        self.argv[name] = list(args)
        self.processes.append(spawn(name, tc.binary(name), args, logs))
        self.save()

    # ------------------------------------------------------------------ faults (for tests)

    def component(self, name: str) -> Process:
        found = next((p for p in self.processes if p.name == name), None)
        if found is None:
            raise KeyError(f"no component {name!r} in cluster {self.name}")
        return found

    async def kill_component(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal one component by its PID (SIGKILL: a crash) and wait until it is gone."""
        proc = self.component(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        await asyncio.to_thread(proc.stop, 5.0)  # reaps it; SIGTERM/SIGKILL only if still alive

    async def start_component(self, name: str, toolchain: Toolchain | None = None) -> None:
        """Start a stopped component again with its original arguments (same ports, same etcd
        data) and wait until it serves."""
        if name not in self.argv:
            raise KeyError(f"{name} was not started by this process; cannot restart it")
        old = self.component(name)
        if old.alive():
            raise RuntimeError(f"{name} is still running (pid {old.pid})")
        tc = toolchain or Toolchain.default()
        new = spawn(name, tc.binary(name), self.argv[name], self.workdir / "logs")
        self.processes[self.processes.index(old)] = new
        self.save()
        if name == "etcd":
            client = next(a for a in self.argv[name] if a.startswith("--listen-client-urls="))
            await self._wait_http(client.split("=", 1)[1] + "/health", "etcd")
        elif name == "kube-apiserver":
            await self._wait_http(f"{self.server}/readyz", name, timeout=READY_TIMEOUT_SECONDS)

    async def restart_component(
        self, name: str, sig: int = signal.SIGTERM, down_seconds: float = 0.0
    ) -> None:
        """Stop one component (SIGTERM, or SIGKILL for a crash), keep it down ``down_seconds``,
        start it again and wait until it serves: ``restart_component("etcd")``,
        ``restart_component("kube-apiserver", signal.SIGKILL)``."""
        await self.kill_component(name, sig)
        if down_seconds > 0:
            await asyncio.sleep(down_seconds)
        await self.start_component(name)

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": self.name,
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {"client-certificate": str(self.admin.cert), "client-key": str(self.admin.key)},
                }
            ],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": "admin"}}],
            "current-context": self.name,
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))

    def _check_alive(self) -> None:
        for proc in self.processes:
            if not proc.alive():
                raise StartupError(proc.exit_reason())

    async def _wait_http(self, url: str, what: str, timeout: float = 60.0) -> None:
        async with self.http() as client:

            async def ok() -> bool:
                try:
                    return (await client.get(url)).status_code == 200
                except httpx.HTTPError:
                    return False

            await self._wait(ok, what, timeout)

    async def _wait(self, check: Any, what: str, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            if await check():
                return
            if time.monotonic() > deadline:
                logs = self.workdir / "logs"
                raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}; logs in {logs}")
            await asyncio.sleep(0.25)

    async def _wait_kwok_nodes_ready(self, client: httpx.AsyncClient, tc: Toolchain) -> None:
        """Wait for the kwok nodes, starting kwok again if it died of its known start-up race.

        kwok v0.7.0 (and v0.8.0) builds CEL environments from two goroutines at start-up (its
        metrics server and its stage controllers) through easycel v0.6.0, whose type-trait cache
        is a plain global map: now and then the process dies with ``fatal error: concurrent map
        writes`` before it serves (seen once in CI, 31 tests of one worker lost). Only that
        signature is retried, a few times, each crash kept as ``kwok.log.crash-<n>``; anything
        else kwok dies of still fails the start-up with its log."""
        for attempt in range(1, KWOK_START_ATTEMPTS + 1):
            try:
                await self._wait(lambda: self._nodes_ready(client), "kwok nodes Ready")
                return
            except StartupError:
                kwok_proc = self.component("kwok")
                last = attempt == KWOK_START_ATTEMPTS
                if last or kwok_proc.alive() or not kwok.died_of_start_up_race(kwok_proc.log):
                    raise
                crashed = kwok_proc.log.with_name(f"kwok.log.crash-{attempt}")
                kwok_proc.log.rename(crashed)
                log.warning(
                    "kwok died of its start-up race (concurrent map writes, %s); starting it again", crashed
                )
                await self.start_component("kwok", tc)

    async def _nodes_ready(self, client: httpx.AsyncClient) -> bool:
        resp = await client.get("/api/v1/nodes", params={"labelSelector": kwok.GPU_POOL_SELECTOR})
        if resp.status_code != 200:
            return False
        ready = {
            item["metadata"]["name"]
            for item in resp.json()["items"]
            for cond in item.get("status", {}).get("conditions", [])
            if cond["type"] == "Ready" and cond["status"] == "True"
        }
        return set(self.gpu_nodes) <= ready

    async def _default_sa(self, client: httpx.AsyncClient) -> bool:
        resp = await client.get("/api/v1/namespaces/default/serviceaccounts/default")
        return resp.status_code == 200
