"""What a component started into a dev cluster needs from the cluster: where to write, how to
reach the apiserver, and where to register its processes.

Kueue and the data path (:mod:`.kueue`, :mod:`.kube_proxy`) are started by
:class:`~vkprovider.devcluster.cluster.Cluster` and type against this protocol instead of the
class, so the cluster can import them and they never import the cluster back (an import cycle
that import-linter now forbids).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import httpx

from vkprovider.devcluster.datapath import DataPath
from vkprovider.devcluster.process import Process


class ClusterHandle(Protocol):
    """The part of a running cluster its add-on components read and extend."""

    name: str
    workdir: Path
    server: str
    kubeconfig: Path
    ca_cert: Path
    #: Every process of the cluster, in start order; ``Cluster.stop()`` stops them newest first.
    processes: list[Process]
    datapath: DataPath | None

    def http(self) -> httpx.AsyncClient:
        """An admin HTTP client for the apiserver."""
        ...

    def save(self) -> None:
        """Persist the cluster's state file (processes included) so another process can stop it."""
        ...
