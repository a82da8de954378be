"""A real kubelet node for the dev cluster: containerd + runc run the pods, in a network namespace.

The dev cluster's nodes are kwok's (no containers). This node runs real ones, so the shipped
image can be installed with ``kubectl apply -k`` of a deploy/ overlay and run as pods
(tests/image/test_real_node.py). Opt-in, root only; what each piece is, and why:

* **kubelet** v1.36.3 from the control plane's pinned tree (:mod:`~vkprovider.devcluster.build`),
  with ``cgroupDriver: cgroupfs`` and ``failCgroupV1: false`` (the machines have hybrid cgroups:
  v1 controllers), ``cgroupsPerQOS: false`` and no node-allocatable enforcement (no systemd to
  delegate cgroups), ``failSwapOn: false``, eviction thresholds near zero (a busy shared disk
  must not evict the pods under test). It talks to Debian's **containerd 1.6** (no
  ``RuntimeConfig`` CRI call: the kubelet logs that once and uses its own cgroup driver) which
  runs **runc** (crun refuses the hybrid cgroups). Its client and serving certificates are
  issued from the cluster's CA (:mod:`~vkprovider.devcluster.pki`), ``system:node:<name>``.
* **Network**: containerd and the kubelet run in their own namespace (a veth pair from
  :class:`~vkprovider.devcluster.netns.KubeletNet`); the node's address is the namespace end,
  so the apiserver reaches the kubelet (logs, exec) at a non-loopback address. Pods get
  addresses from a ``/24`` of 198.18.0.0/15 on a CNI bridge (Debian's containernetworking
  plugins) inside that namespace; the host routes the ``/24`` through the veth, so the apiserver
  reaches a pod's ports too (vkprovider's kubelet API on its pod IP).
* **The apiserver** listens on 127.0.0.1 only: :mod:`~vkprovider.devcluster.tcp_forward`
  relays the host end of the veth to it, and a DNAT rule *inside the node's namespace* sends the
  ``kubernetes`` Service's address (``KUBERNETES_SERVICE_HOST``, in the apiserver's serving
  certificate) there, so in-cluster clients work unchanged. No rule is added to the host's
  tables; there is no kube-proxy or cluster DNS (other Services do not resolve).
* **Mounts**: containerd runs in a private mount namespace (``unshare --mount``) that the kubelet
  joins (``nsenter``), so every overlay, tmpfs and netns bind-mount of the node lives and dies
  with those processes; nothing is mounted in the host's namespace.
* **Images** cannot be pulled (no registry): ``import_image`` loads one from podman's store
  (``make image``) and the sandbox image is made locally (:mod:`~vkprovider.devcluster.node_tools`).

``stop()`` ends the kubelet, removes every pod sandbox through the CRI (containerd deletes each
pod's network namespace), ends containerd, any shim it left and the relay, by PID, then deletes
the node's namespace (its routes and rules go with it), the Node object and its directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from vkprovider.devcluster import apt, node_tools, pki
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.cluster import Cluster
from vkprovider.devcluster.containers import Engines
from vkprovider.devcluster.netns import KubeletNet, NetnsError
from vkprovider.devcluster.process import Process, StartupError, free_port, spawn

log = logging.getLogger(__name__)

#: binary (or path) → Debian package: what the node runs besides the kubelet.
PACKAGES = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "nft": "nftables",
    "conntrack": "conntrack",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
}
CNI_BIN = Path("/usr/lib/cni")
READY_TIMEOUT_SECONDS = 120.0
CLUSTER_DOMAIN = "cluster.local"
#: kube-proxy's user: the apiserver's bootstrap policy binds it to ``system:node-proxier``.
KUBE_PROXY_USER = "system:kube-proxy"
#: Pod subnets are /24s counted down from the top of 198.18.0.0/16, one per node namespace (its
#: veth's index), far from the /30s ``KubeletNet`` hands out from the bottom.
_POD_SUBNETS_TOP = 255


#: Run by ``sh -c`` in containerd's new mount namespace before it execs containerd (``$0 "$@"``):
#: a tmpfs of its own on /run/netns, where containerd 1.6 bind-mounts each pod's network
#: namespace, so pod namespaces never show in the host's ``ip netns list`` and go with the mount
#: namespace even if the node is killed before it could remove its pods.
_PRIVATE_NETNS_DIR = (
    'mkdir -p /run/netns && mount -t tmpfs -o size=1m,mode=755 vkp-netns /run/netns && exec "$0" "$@"'
)


class NodeUnavailable(RuntimeError):
    """A real node cannot run on this machine; the message says why (a test's skip reason)."""


def unavailable() -> str | None:
    """Why a real node cannot run here, or None. Checks what is cheap to check up front."""
    if os.geteuid() != 0:
        return "a real kubelet node needs root (network namespaces, mounts, cgroups)"
    if shutil.which("ip") is None or shutil.which("nsenter") is None or shutil.which("unshare") is None:
        return "a real kubelet node needs iproute2 and util-linux (ip, nsenter, unshare)"
    if not Path("/sys/fs/cgroup/memory").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "no cgroup hierarchy with a memory controller at /sys/fs/cgroup"
    return None


def _run(argv: list[str], what: str, timeout: float = 120, check: bool = True) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise StartupError(
            f"{what}: `{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-800:]}"
        )
    return done.stdout


def _pod_cidr(net: KubeletNet) -> str:
    index = int(net.host_link.removeprefix("vkh"))
    if index >= _POD_SUBNETS_TOP // 2:
        raise NetnsError(f"veth index {index} too high for a pod subnet")
    return f"198.18.{_POD_SUBNETS_TOP - index}.0/24"


def sweep_dead_nodes() -> None:
    """Tear down nodes left by a killed run: those whose cluster is no longer running (their
    processes and shims stopped by PID, namespace deleted, directory removed). A node of a running
    cluster is its owner's to stop; a directory with no state yet may be booting."""
    root = node_tools.tools_root() / "run"
    if not root.is_dir():
        return
    for workdir in root.iterdir():
        node = RealNode.load(workdir)
        if node is None:
            continue
        if node.cluster is not None and node.cluster.running():
            continue
        log.warning("removing the dead real node %s (%s)", node.name, workdir)
        asyncio.run(node.stop())


@dataclass
class RealNode:
    """One kubelet node of a dev cluster; ``stop()`` undoes everything ``start`` made."""

    name: str
    workdir: Path
    net: KubeletNet
    pod_cidr: str
    kubelet_port: int
    crictl: Path
    #: None only for a node loaded from a dead run (``sweep_dead_nodes``)
    cluster: Cluster | None
    processes: list[Process] = field(default_factory=list)

    def save(self) -> None:
        state = {
            "name": self.name,
            "cluster_workdir": str(self.cluster.workdir) if self.cluster else None,
            "net": self.net.to_json(),
            "pod_cidr": self.pod_cidr,
            "kubelet_port": self.kubelet_port,
            "crictl": str(self.crictl),
            "processes": [p.to_json() for p in self.processes],
        }
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, workdir: Path) -> RealNode | None:
        try:
            state: dict[str, Any] = json.loads((workdir / "state.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        cluster_workdir = state.get("cluster_workdir")
        return cls(
            name=state["name"],
            workdir=workdir,
            net=KubeletNet.from_json(state["net"]),
            pod_cidr=state["pod_cidr"],
            kubelet_port=int(state["kubelet_port"]),
            crictl=Path(state["crictl"]),
            cluster=Cluster.load(Path(cluster_workdir)) if cluster_workdir else None,
            processes=[Process.from_json(p) for p in state["processes"]],
        )

    @property
    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise StartupError(f"node {self.name} has no cluster")
        return self.cluster

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def address(self) -> str:
        """The node's InternalIP: the namespace end of its veth."""
        return self.net.ns_ip

    # ------------------------------------------------------------------ start

    @classmethod
    async def start(cls, cluster: Cluster, name: str | None = None) -> RealNode:
        """Start containerd and a kubelet that registers ``name`` (default ``<cluster>-node``)
        and return once the Node is Ready. NodeUnavailable where this machine cannot run one."""
        reason = unavailable()
        if reason:
            raise NodeUnavailable(reason)
        try:
            await asyncio.to_thread(apt.install, PACKAGES)
        except (StartupError, subprocess.CalledProcessError) as exc:
            raise NodeUnavailable(f"cannot install {', '.join(apt.missing(PACKAGES))}: {exc}") from None
        toolchain = Toolchain.default()
        if toolchain.missing(("kubelet", "kube-proxy")):
            raise StartupError("the kubelet and kube-proxy are not built; run `make cluster-build` first")
        crictl = await asyncio.to_thread(node_tools.build_crictl)
        pause = await asyncio.to_thread(node_tools.pause_archive)

        name = name or f"{cluster.name}-node"
        await asyncio.to_thread(sweep_dead_nodes)
        workdir = node_tools.tools_root() / "run" / name
        shutil.rmtree(workdir, ignore_errors=True)
        for sub in ("pki", "logs", "pod-logs", "cni/conf", "kubelet", "containerd"):
            (workdir / sub).mkdir(parents=True)
        try:
            net = await asyncio.to_thread(KubeletNet.create, f"{name}"[:30])
        except NetnsError as exc:
            raise NodeUnavailable(f"no network namespace for the node: {exc}") from None
        node = cls(name, workdir, net, "", free_port(), crictl, cluster)
        try:
            node.pod_cidr = _pod_cidr(net)
            node.save()
            await node._boot(toolchain, pause)
        except BaseException:
            await node.stop()
            raise
        return node

    async def _boot(self, toolchain: Toolchain, pause: Path) -> None:
        api_port = int(self._cluster.server.rsplit(":", 1)[1])
        relay_port = free_port()
        service_ip, service_port = await self._kubernetes_service()
        self._write_files(relay_port)
        self._spawn(
            "api-relay",
            Path(sys.executable),
            [
                "-m",
                "vkprovider.devcluster.tcp_forward",
                self.net.host_ip,
                str(relay_port),
                "127.0.0.1",
                str(api_port),
            ],
        )
        await asyncio.to_thread(self._plumb, service_ip, service_port, relay_port)
        self._spawn(
            "cluster-dns",
            Path(sys.executable),
            [
                "-m",
                "vkprovider.devcluster.cluster_dns",
                f"--listen={self.net.host_ip}:53",
                f"--kubeconfig={self._cluster.kubeconfig}",
                f"--domain={CLUSTER_DOMAIN}",
            ],
        )
        kube_proxy = toolchain.binary("kube-proxy")
        self._spawn(
            "kube-proxy",
            Path("/usr/bin/nsenter"),
            [
                f"--net=/run/netns/{self.net.netns}",
                str(kube_proxy),
                f"--config={self.workdir / 'kube-proxy.yaml'}",
            ],
            real_binary=str(kube_proxy),
        )

        containerd = self._spawn(
            "containerd",
            Path("/usr/bin/nsenter"),
            [
                f"--net=/run/netns/{self.net.netns}",
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "/bin/sh",
                "-c",
                _PRIVATE_NETNS_DIR,
                shutil.which("containerd") or "containerd",
                "--config",
                str(self.workdir / "containerd" / "config.toml"),
            ],
            real_binary=shutil.which("containerd") or "containerd",
        )
        await self._wait(self._containerd_up, "containerd", 60)
        await asyncio.to_thread(self.import_archive, pause)

        kubelet = toolchain.binary("kubelet")
        self._spawn(
            "kubelet",
            Path("/usr/bin/nsenter"),
            [
                "-t",
                str(containerd.pid),
                "--mount",
                "--net",
                str(kubelet),
                f"--config={self.workdir / 'kubelet-config.yaml'}",
                f"--kubeconfig={self.workdir / 'kubeconfig'}",
                f"--root-dir={self.workdir / 'kubelet'}",
                f"--cert-dir={self.workdir / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.address}",
                "--v=1",
            ],
            real_binary=str(kubelet),
        )
        await self._wait(self._ready, f"node {self.name} Ready", READY_TIMEOUT_SECONDS)
        log.info("real node %s Ready at %s (pods in %s)", self.name, self.address, self.pod_cidr)

    async def _kubernetes_service(self) -> tuple[str, int]:
        """The ``kubernetes`` Service's address: what pods get as ``KUBERNETES_SERVICE_HOST``."""
        async with self._cluster.http() as client:
            resp = await client.get("/api/v1/namespaces/default/services/kubernetes")
            resp.raise_for_status()
            spec = resp.json()["spec"]
            return str(spec["clusterIP"]), int(spec["ports"][0]["port"])

    def _write_files(self, relay_port: int) -> None:
        pki_dir = self.workdir / "pki"
        ca = pki.CertificateAuthority.load(self._cluster.ca_cert.parent)
        client = ca.issue(
            pki_dir, "kubelet-client", f"system:node:{self.name}", organization="system:nodes", client=True
        )
        serving = ca.issue(
            pki_dir,
            "kubelet-serving",
            f"system:node:{self.name}",
            server=True,
            dns_names=(self.name,),
            ip_addresses=(self.address,),
        )
        proxy = ca.issue(pki_dir, "kube-proxy", KUBE_PROXY_USER, client=True)
        self._write_kubeconfig(self.workdir / "kubeconfig", client, relay_port)
        self._write_kubeconfig(self.workdir / "kube-proxy.kubeconfig", proxy, relay_port)
        (self.workdir / "kube-proxy.yaml").write_text(yaml.safe_dump(self._kube_proxy_config()))
        # for dnsPolicy Default (and hostNetwork) pods: no resolver of the host is theirs to use
        (self.workdir / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        (self.workdir / "kubelet-config.yaml").write_text(yaml.safe_dump(self._kubelet_config(serving)))
        (self.workdir / "containerd" / "config.toml").write_text(self._containerd_config())
        (self.workdir / "cni" / "conf" / "10-vkprovider.conflist").write_text(json.dumps(self._cni_config()))

    def _write_kubeconfig(self, path: Path, user: pki.CertPair, relay_port: int) -> None:
        cluster = self._cluster
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster.name,
                    "cluster": {
                        "server": f"https://{self.net.host_ip}:{relay_port}",
                        "certificate-authority": str(cluster.ca_cert),
                        # the relay's address is not in the apiserver's certificate; localhost is
                        "tls-server-name": "localhost",
                    },
                }
            ],
            "users": [
                {"name": "node", "user": {"client-certificate": str(user.cert), "client-key": str(user.key)}}
            ],
            "contexts": [{"name": "node", "context": {"cluster": cluster.name, "user": "node"}}],
            "current-context": "node",
        }
        path.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))

    def _kube_proxy_config(self) -> dict[str, Any]:
        """kube-proxy in nftables mode in the node's namespace: its ports are that namespace's
        own; conntrack sizes are the host's (not its to change: zeros leave them); every Service
        connection is masqueraded, so a pod reaching a pod on the same bridge through a ClusterIP
        gets the reply through the node (no br_netfilter needed)."""
        return {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.workdir / "kube-proxy.kubeconfig")},
            "mode": "nftables",
            "hostnameOverride": self.name,
            "bindAddress": self.address,
            "clusterCIDR": self.pod_cidr,
            "masqueradeAll": True,
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "nftables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
        }

    def _kubelet_config(self, serving: pki.CertPair) -> dict[str, Any]:
        endpoint = f"unix://{self.socket}"
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.address,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzPort": 0,
            "tlsCertFile": str(serving.cert),
            "tlsPrivateKeyFile": str(serving.key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self._cluster.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failSwapOn": False,
            "containerRuntimeEndpoint": endpoint,
            "imageServiceEndpoint": endpoint,
            "resolvConf": str(self.workdir / "resolv.conf"),
            # Not the default /var/log/pods: each kubelet's container GC removes every pod log
            # directory there whose pod it does not know (evictPodLogsDirectories), so two nodes
            # on one machine (parallel test workers) deleted each other's logs mid-test.
            "podLogsDir": str(self.workdir / "pod-logs"),
            # A mounted Secret's or ConfigMap's change reaches the files at the pod's next sync,
            # every syncFrequency (default 1 m plus jitter): the documented key rotation (the
            # api_key_file way, docs-verbatim) waited 60-90 s on it. Short-lived dev pods, ten
            # seconds; the mechanism is the kubelet's own either way.
            "syncFrequency": "10s",
            "clusterDNS": [self.net.host_ip],  # devcluster.cluster_dns, on the veth's host end
            "clusterDomain": CLUSTER_DOMAIN,
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            # the dev cluster's controller-manager calls a node dead after 10 s without a heartbeat
            # (--node-monitor-grace-period, kwok-tuned): renew the Lease every 2 s (25 % of 8 s)
            "nodeLeaseDurationSeconds": 8,
            "nodeStatusUpdateFrequency": "4s",
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "maxPods": 20,
            "podPidsLimit": -1,
            "kernelMemcgNotification": False,
        }

    def _containerd_config(self) -> str:
        root = self.workdir / "containerd"
        return f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{node_tools.PAUSE_IMAGE}"
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc") or "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{self.workdir / "cni" / "conf"}"
"""

    def _cni_config(self) -> dict[str, Any]:
        return {
            "cniVersion": "0.4.0",
            "name": "vkprovider-pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.workdir / "cni" / "ipam"),
                        "ranges": [[{"subnet": self.pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def _plumb(self, service_ip: str, service_port: int, relay_port: int) -> None:
        """Routing between host, node namespace and pods; every change is inside the node's
        namespace except a route for the pod subnet, which goes with the veth.

        The ``kubernetes`` Service goes to the relay by a DNAT in a table of its own at a
        priority before kube-proxy's (-110, before dstnat's -100): the first NAT binding of a connection
        wins, and kube-proxy would send it to the apiserver's advertised 127.0.0.1."""
        ns = ["ip", "netns", "exec", self.net.netns]
        _run([*ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], "enable forwarding in the node namespace")
        target = f"{self.net.host_ip}:{relay_port}"
        match = f"ip daddr {ipaddress.ip_address(service_ip)} tcp dport {service_port}"
        rules = f"""table ip vkprovider-node {{
  chain prerouting {{ type nat hook prerouting priority -110; {match} dnat to {target}; }}
  chain output {{ type nat hook output priority -110; {match} dnat to {target}; }}
}}
"""
        (self.workdir / "node.nft").write_text(rules)
        _run(
            [*ns, "nft", "-f", str(self.workdir / "node.nft")],
            "send the kubernetes Service to the apiserver relay",
        )
        _run(
            ["ip", "route", "replace", self.pod_cidr, "via", self.address, "dev", self.net.host_link],
            "route the pod subnet through the node's veth",
        )

    def _spawn(self, name: str, binary: Path, args: list[str], real_binary: str | None = None) -> Process:
        proc = spawn(name, binary, args, self.workdir / "logs")
        if real_binary:  # nsenter/unshare exec it: the PID's command line names it
            proc = dataclasses.replace(proc, binary=real_binary)
        self.processes.append(proc)
        self.save()
        return proc

    async def _wait(self, check: Any, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for proc in self.processes:
                if not proc.alive():
                    raise StartupError(proc.exit_reason())
            if await check():
                return
            if time.monotonic() > deadline:
                raise StartupError(
                    f"timed out after {timeout:.0f}s waiting for {what}; logs in {self.workdir / 'logs'}"
                )
            await asyncio.sleep(0.5)

    def _ctr(self, *args: str) -> list[str]:
        return ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args]

    async def _containerd_up(self) -> bool:
        if not self.socket.exists():
            return False
        done = await asyncio.to_thread(subprocess.run, self._ctr("version"), capture_output=True, timeout=10)
        return done.returncode == 0

    async def _ready(self) -> bool:
        async with self._cluster.http() as client:
            resp = await client.get(f"/api/v1/nodes/{self.name}")
        if resp.status_code != 200:
            return False
        conditions = resp.json().get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # ------------------------------------------------------------------ images

    def import_archive(self, archive: Path) -> None:
        """Load an image archive (OCI or docker) into the node's containerd."""
        _run(
            self._ctr("images", "import", str(archive)), f"import {archive.name} into containerd", timeout=600
        )

    def import_image(self, ref: str, engines: Engines | None = None) -> None:
        """Copy ``ref`` from podman's store (``make image``) into the node's containerd, under the
        same name (``localhost/vkprovider:0.1.0``): what a pod's ``image:`` must name."""
        engines = engines or Engines.default()
        archive = self.workdir / "image.oci.tar"
        try:
            engines.run(
                engines.podman("save", "--format", "oci-archive", "-o", str(archive), ref), f"save {ref}"
            )
            self.import_archive(archive)
        finally:
            archive.unlink(missing_ok=True)

    def tag_image(self, source: str, target: str) -> None:
        """Give an imported image a second name in the node's containerd: what a push of a new
        tag is to a registry (docs/deploy.md's Upgrade, without a registry)."""
        _run(self._ctr("images", "tag", "--force", source, target), f"tag {source} as {target}")

    def images(self) -> list[str]:
        return _run(self._ctr("images", "list", "--quiet"), "list images").split()

    # ------------------------------------------------------------------ stop

    async def stop(self) -> None:
        """Stop the kubelet, remove all pod sandboxes, stop containerd, its shims and the relay
        (by PID), delete the namespace, the Node and the node's directory. Safe to repeat."""
        by_name = {p.name: p for p in self.processes}
        if "kubelet" in by_name:
            await asyncio.to_thread(by_name["kubelet"].stop)
        if "containerd" in by_name and by_name["containerd"].alive():
            endpoint = f"unix://{self.socket}"
            await asyncio.to_thread(
                _run,
                [
                    str(self.crictl),
                    "--runtime-endpoint",
                    endpoint,
                    "--image-endpoint",
                    endpoint,
                    "rmp",
                    "--all",
                    "--force",
                ],
                "remove the pod sandboxes",
                120,
                False,
            )
            await asyncio.to_thread(by_name["containerd"].stop)
        await asyncio.to_thread(self._kill_shims)
        for proc in reversed(self.processes):
            await asyncio.to_thread(proc.stop)
        self.processes.clear()
        await asyncio.to_thread(self.net.remove)
        if self.cluster is not None and self.cluster.running():
            try:
                async with self.cluster.http() as client:
                    await client.delete(f"/api/v1/nodes/{self.name}")
            except httpx.HTTPError as exc:
                log.warning("node %s not deleted: %s", self.name, exc)
        await asyncio.to_thread(self._unmount_leftovers)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _kill_shims(self) -> None:
        """containerd-shim-runc-v2 processes detach from containerd; find this node's by the
        socket path on their command line (unique to this node) and SIGKILL them by PID."""
        marker = str(self.socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmdline.split(b"\0", 1)[0] and marker in cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def _unmount_leftovers(self) -> None:
        """Nothing should be mounted under the node's directory in the host's mount namespace
        (containerd's is private); unmount anything that is, deepest first."""
        root = str(self.workdir)
        mounts = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(root)
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            log.warning("unmounting leftover %s", mount)
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
