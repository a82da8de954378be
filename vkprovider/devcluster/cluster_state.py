"""Where dev clusters live on disk, and the state file that lets another process find one.

A cluster writes ``state.json`` in its run directory (its processes' PIDs, certificates, network
namespaces) each time it starts a process, so ``python -m vkprovider.devcluster down``, a later
start under the same name or :func:`sweep_dead_clusters` can stop or clean it up by PID. The file
format is shared by every checkout using the same cache, so it only ever gains optional keys.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vkprovider.devcluster import pki
from vkprovider.devcluster.datapath import DataPath
from vkprovider.devcluster.netns import KubeletNet
from vkprovider.devcluster.process import Process

STATE_FILE = "state.json"


def run_root() -> Path:
    """The directory holding one run directory per cluster name (under ``VKPROVIDER_CACHE``)."""
    base = os.environ.get("VKPROVIDER_CACHE") or str(Path.home() / ".cache" / "vkprovider")
    return Path(base) / "run"


@dataclass
class ClusterState:
    """What ``state.json`` records of a cluster: enough to reach it and to stop what it started."""

    name: str
    server: str
    kubeconfig: Path
    ca_cert: Path
    admin: pki.CertPair
    processes: list[Process] = field(default_factory=list)
    gpu_nodes: list[str] = field(default_factory=list)
    kubelet_net: KubeletNet | None = None
    kubelet_serving: pki.CertPair | None = None
    datapath: DataPath | None = None

    def save(self, workdir: Path) -> None:
        state = {
            "name": self.name,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "ca_cert": str(self.ca_cert),
            "admin": [str(self.admin.cert), str(self.admin.key)],
            "gpu_nodes": self.gpu_nodes,
            "processes": [p.to_json() for p in self.processes],
            "kubelet_net": self.kubelet_net.to_json() if self.kubelet_net else None,
            "kubelet_serving": [str(self.kubelet_serving.cert), str(self.kubelet_serving.key)]
            if self.kubelet_serving
            else None,
            "datapath": self.datapath.to_json() if self.datapath else None,
        }
        (workdir / STATE_FILE).write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, workdir: Path) -> ClusterState | None:
        """The state saved in ``workdir``, or None where there is none (yet) or it is torn."""
        try:
            state: dict[str, Any] = json.loads((workdir / STATE_FILE).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return cls(
            name=state["name"],
            server=state["server"],
            kubeconfig=Path(state["kubeconfig"]),
            ca_cert=Path(state["ca_cert"]),
            admin=pki.CertPair(Path(state["admin"][0]), Path(state["admin"][1])),
            processes=[Process.from_json(p) for p in state["processes"]],
            gpu_nodes=list(state["gpu_nodes"]),
            kubelet_net=KubeletNet.from_json(state["kubelet_net"]) if state.get("kubelet_net") else None,
            kubelet_serving=pki.CertPair(*map(Path, state["kubelet_serving"]))
            if state.get("kubelet_serving")
            else None,
            datapath=DataPath.from_json(state["datapath"]) if state.get("datapath") else None,
        )


def forget(workdir: Path) -> None:
    """Remove the state file: the cluster's processes are stopped, nothing is left to find."""
    (workdir / STATE_FILE).unlink(missing_ok=True)


def sweep_dead_clusters() -> None:
    """Remove run directories of clusters whose processes all died (a killed test run, a reboot),
    so etcd data does not pile up. A directory without state is left alone: it may be booting."""
    root = run_root()
    if not root.is_dir():
        return
    for workdir in root.iterdir():
        state = ClusterState.load(workdir)
        if state is not None and not any(p.alive() for p in state.processes):
            if state.kubelet_net is not None:
                state.kubelet_net.remove()
            if state.datapath is not None:
                state.datapath.remove()
            shutil.rmtree(workdir, ignore_errors=True)
