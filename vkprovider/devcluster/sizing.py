"""Flags that size the local control plane for many pods (opt-in: ``Cluster.start(size=...)``).

The defaults of etcd and the Kubernetes components suit a laptop's few hundred pods; a bench of
10,000 pods on one node needs more room. ``ControlPlaneSize()`` keeps every default (no flag
added); ``ControlPlaneSize.large()`` is what ``bench/bench_pods.py --pods 10000`` uses:

* etcd ``--quota-backend-bytes`` 8 GiB (default 2 GiB): 10,000 pods with their managedFields,
  their Events and the revisions kept between the apiserver's compactions (every 5 minutes);
* kube-apiserver ``--max-requests-inflight`` 1600 / ``--max-mutating-requests-inflight`` 800
  (defaults 400 / 200): a bench client, the service and the controllers write at once;
* kube-controller-manager and kube-scheduler ``--kube-api-qps`` 500 / ``--kube-api-burst``
  1000 (defaults 20/30 and 50/100): the controllers' own writes (pod GC, Events, endpoints)
  must not lag minutes behind 10,000 pods.

The node's capacity ``pods`` is the service's ``node.max_pods`` (default 10,000), not a flag here.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class ControlPlaneSize:
    """None everywhere: the component's own default (the flag is not passed)."""

    etcd_quota_backend_bytes: int | None = None
    max_requests_inflight: int | None = None
    max_mutating_requests_inflight: int | None = None
    controllers_qps: float | None = None  #: controller-manager and scheduler ``--kube-api-qps``
    controllers_burst: int | None = None  #: and their ``--kube-api-burst``

    @classmethod
    def large(cls) -> ControlPlaneSize:
        """Room for 10,000 pods on one node (see the module docstring)."""
        return cls(
            etcd_quota_backend_bytes=8 * GIB,
            max_requests_inflight=1600,
            max_mutating_requests_inflight=800,
            controllers_qps=500.0,
            controllers_burst=1000,
        )

    def etcd_args(self) -> list[str]:
        return _flags(("--quota-backend-bytes", self.etcd_quota_backend_bytes))

    def apiserver_args(self) -> list[str]:
        return _flags(
            ("--max-requests-inflight", self.max_requests_inflight),
            ("--max-mutating-requests-inflight", self.max_mutating_requests_inflight),
        )

    def controllers_args(self) -> list[str]:
        """For kube-controller-manager and kube-scheduler alike."""
        return _flags(("--kube-api-qps", self.controllers_qps), ("--kube-api-burst", self.controllers_burst))


def _flags(*pairs: tuple[str, float | int | None]) -> list[str]:
    return [
        f"{flag}={value:g}" if isinstance(value, float) else f"{flag}={value}"
        for flag, value in pairs
        if value is not None
    ]
