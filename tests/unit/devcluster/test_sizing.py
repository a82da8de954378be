"""The control plane's size flags: none unless asked for, and the large set for 10,000 pods."""

from __future__ import annotations

from vkprovider.devcluster.sizing import GIB, ControlPlaneSize


def test_the_default_size_passes_no_flag() -> None:
    size = ControlPlaneSize()
    assert size.etcd_args() == size.apiserver_args() == size.controllers_args() == []


def test_the_large_size_raises_etcd_apiserver_and_controller_limits() -> None:
    size = ControlPlaneSize.large()
    assert size.etcd_args() == [f"--quota-backend-bytes={8 * GIB}"]
    assert size.apiserver_args() == ["--max-requests-inflight=1600", "--max-mutating-requests-inflight=800"]
    assert size.controllers_args() == ["--kube-api-qps=500", "--kube-api-burst=1000"]
