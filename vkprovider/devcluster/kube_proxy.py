"""Start the dev cluster's data path: kube-proxy (nftables mode) in the node namespace.

kube-proxy is the one built from the pinned Kubernetes tree (``build.NODE_COMMANDS``), run as
it runs on a node: its own client certificate (``system:kube-proxy``, which the apiserver's
bootstrap policy binds to the ``system:node-proxier`` ClusterRole — the least it needs: read
Services, EndpointSlices and Nodes, write Events), its own kubeconfig, a
``KubeProxyConfiguration`` file, and ``hostnameOverride`` naming the kwok node the namespace
stands for. It reaches the apiserver through the data path agent's relay (:mod:`api_relay`).
``nft``, ``iptables`` and ``conntrack`` come from Debian (:mod:`apt`) when missing.

Conntrack sysctls are left as they are (``maxPerCore: 0``, zero timeouts): the namespace shares
the host's conntrack table size, which is not kube-proxy's to change here.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import yaml

from vkprovider.devcluster import apt, pki
from vkprovider.devcluster.api_relay import RELAY_PORT
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.datapath import NODE_LINK_IP, POD_CIDR, DataPath
from vkprovider.devcluster.handle import ClusterHandle
from vkprovider.devcluster.netns import NetnsError
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.process import Process, StartupError, spawn
from vkprovider.devcluster.replica_http import get

#: binary → Debian package: what kube-proxy's nftables mode and its clean-up call.
DEBIAN_TOOLS = {"nft": "nftables", "iptables": "iptables", "conntrack": "conntrack"}
#: kube-proxy's own ports, on the node namespace's loopback (no clash between clusters).
HEALTHZ_PORT = 10256
METRICS_PORT = 10249
USER = "system:kube-proxy"


def configuration(kubeconfig: Path, node_name: str) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "nftables",
        "hostnameOverride": node_name,
        "bindAddress": NODE_LINK_IP,
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"127.0.0.1:{HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{METRICS_PORT}",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        # apply an endpoint change at once (the default waits up to 1 s to batch changes)
        "nftables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
    }


def kubeconfig(cert: pki.CertPair, ca_cert: Path) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dev",
                "cluster": {
                    "server": f"https://127.0.0.1:{RELAY_PORT}",
                    "certificate-authority": str(ca_cert),
                },
            }
        ],
        "users": [
            {"name": USER, "user": {"client-certificate": str(cert.cert), "client-key": str(cert.key)}}
        ],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": USER}}],
        "current-context": "dev",
    }


def _api_port(server: str) -> int:
    return int(server.rsplit(":", 1)[1])


async def start(
    cluster: ClusterHandle, ca: pki.CertificateAuthority, toolchain: Toolchain, node: str
) -> DataPath:
    """Make the namespaces, start the agent and kube-proxy, and return once kube-proxy is healthy
    (it has synced its rules once). The processes join ``cluster.processes`` (``cluster.stop()``
    ends them and removes the namespaces); on failure this undoes its own part and raises
    StartupError, leaving the rest of the cluster running."""
    await asyncio.to_thread(apt.install, DEBIAN_TOOLS)
    if toolchain.missing(("kube-proxy",)):
        raise StartupError("kube-proxy is not built; run `make cluster-build` first")
    try:
        path = await asyncio.to_thread(DataPath.create, cluster.name)
    except NetnsError as exc:
        raise StartupError(f"no data path (network namespaces): {exc}") from None
    cluster.datapath = path
    cluster.save()
    started: list[Process] = []
    try:
        await _processes(cluster, ca, toolchain, node, path, started)
    except BaseException:
        for proc in reversed(started):
            await asyncio.to_thread(proc.stop)
            cluster.processes.remove(proc)
        await asyncio.to_thread(path.remove)
        cluster.datapath = None
        cluster.save()
        raise
    return path


async def _processes(
    cluster: ClusterHandle,
    ca: pki.CertificateAuthority,
    toolchain: Toolchain,
    node: str,
    path: DataPath,
    started: list[Process],
) -> None:
    workdir = cluster.workdir / "datapath"
    workdir.mkdir(exist_ok=True)
    logs = cluster.workdir / "logs"
    agent_args = [
        "-m",
        "vkprovider.devcluster.datapath_agent",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--api-port={_api_port(cluster.server)}",
        f"--node-netns={path.node}",
        f"--backends-netns={path.backends}",
    ]
    started.append(spawn("datapath-agent", Path(sys.executable), agent_args, logs))
    cluster.processes.append(started[-1])
    cluster.save()

    cert = ca.issue(cluster.workdir / "pki", "kube-proxy", USER, client=True)
    config_file = workdir / "kube-proxy.kubeconfig"
    config_file.write_text(yaml.safe_dump(kubeconfig(cert, cluster.ca_cert), sort_keys=False))
    proxy_config = workdir / "kube-proxy.yaml"
    proxy_config.write_text(yaml.safe_dump(configuration(config_file, node), sort_keys=False))
    started.append(
        spawn(
            "kube-proxy",
            toolchain.binary("kube-proxy"),
            [f"--config={proxy_config}", "--v=2"],
            logs,
            netns=path.node,
        )
    )
    cluster.processes.append(started[-1])
    cluster.save()
    await wait_healthy(path, started[::-1])


async def wait_healthy(path: DataPath, processes: list[Process], timeout: float = 60.0) -> None:
    """Until kube-proxy's healthz (in the node namespace) answers 200: its rules are in place."""
    node = NetnsSockets(path.node)
    deadline = time.monotonic() + timeout
    try:
        while True:
            for proc in processes:
                if not proc.alive():
                    raise StartupError(proc.exit_reason())
            try:
                await get(await node.client(), "127.0.0.1", HEALTHZ_PORT, "/healthz")
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise StartupError(f"kube-proxy not healthy after {timeout:.0f}s; see {processes[0].log}")
            await asyncio.sleep(0.25)
    finally:
        node.close()
