"""The control-plane command lines (``devcluster.control_plane``), read back flag by flag.

A flag dropped from these lists does not fail anything until a cluster boots and some test far
away misbehaves (no ClusterIPs in the data path's range, an empty audit log, etcd on the wrong
port); here it fails by name.
"""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from vkprovider.devcluster import audit, control_plane, pki
from vkprovider.devcluster.cluster_state import ClusterState
from vkprovider.devcluster.datapath import KUBERNETES_SERVICE_IP, SERVICE_CIDR
from vkprovider.devcluster.netns import KubeletNet
from vkprovider.devcluster.process import Process
from vkprovider.devcluster.sizing import ControlPlaneSize


def _pair(name: str) -> pki.CertPair:
    return pki.CertPair(Path(f"/pki/{name}.crt"), Path(f"/pki/{name}.key"))


CERTS = control_plane.ControlPlaneCerts(
    ca=_pair("ca"),
    serving=_pair("apiserver"),
    kubelet_client=_pair("kubelet-client"),
    kubelet_serving=_pair("kubelet-serving"),
    front_proxy=_pair("front-proxy"),
    service_account=_pair("sa"),
)


def _flags(args: list[str]) -> dict[str, str]:
    """``--flag=value`` → {flag: value}, failing on a flag given twice (the last would win)."""
    pairs = [a.split("=", 1) if "=" in a else [a, ""] for a in args]
    flags = {k: v for k, v in pairs}
    assert len(flags) == len(pairs), f"a flag is repeated in {args}"
    return flags


def test_etcd_listens_and_advertises_its_two_ports_on_loopback() -> None:
    flags = _flags(control_plane.etcd_args(Path("/run/etcd"), 2379, 2380, ControlPlaneSize()))
    assert flags["--data-dir"] == "/run/etcd"
    assert flags["--listen-client-urls"] == flags["--advertise-client-urls"] == "http://127.0.0.1:2379"
    assert flags["--listen-peer-urls"] == flags["--initial-advertise-peer-urls"] == "http://127.0.0.1:2380"
    assert flags["--initial-cluster"] == "default=http://127.0.0.1:2380"
    assert "--quota-backend-bytes" not in flags  # the default size passes no sizing flag


def test_etcd_takes_the_large_size_quota() -> None:
    flags = _flags(control_plane.etcd_args(Path("/e"), 1, 2, ControlPlaneSize.large()))
    assert flags["--quota-backend-bytes"] == str(8 * 1024**3)


def test_apiserver_serves_the_data_paths_service_range_with_the_clusters_certs() -> None:
    flags = _flags(control_plane.apiserver_args(2379, 6443, CERTS, ControlPlaneSize()))
    assert flags["--service-cluster-ip-range"] == SERVICE_CIDR
    assert flags["--etcd-servers"] == "http://127.0.0.1:2379"
    assert flags["--secure-port"] == "6443"
    assert flags["--bind-address"] == "127.0.0.1"
    assert flags["--tls-cert-file"] == "/pki/apiserver.crt"
    assert flags["--client-ca-file"] == flags["--kubelet-certificate-authority"] == "/pki/ca.crt"
    assert flags["--kubelet-client-certificate"] == "/pki/kubelet-client.crt"
    assert flags["--proxy-client-cert-file"] == "/pki/front-proxy.crt"  # metrics-server's aggregation
    assert flags["--service-account-signing-key-file"] == "/pki/sa.key"
    assert flags["--authorization-mode"] == "Node,RBAC"
    assert not any(f.startswith("--audit-") for f in flags)  # no audit unless asked


def test_apiserver_writes_the_audit_log_when_users_are_audited(tmp_path: Path) -> None:
    audited = audit.apiserver_args(tmp_path, ["alice"])
    flags = _flags(control_plane.apiserver_args(1, 2, CERTS, ControlPlaneSize.large(), audited))
    assert flags["--audit-log-path"] == str(tmp_path / audit.LOG_FILE)
    assert Path(flags["--audit-policy-file"]).is_file()
    assert flags["--max-requests-inflight"] == "1600"
    assert flags["--service-cluster-ip-range"] == SERVICE_CIDR  # audit adds, does not replace


def test_controller_manager_signs_with_the_ca_and_checks_nodes_often() -> None:
    flags = _flags(control_plane.controller_manager_args(Path("/kc"), 10257, CERTS, ControlPlaneSize()))
    assert flags["--kubeconfig"] == "/kc"
    assert flags["--secure-port"] == "10257"
    assert (flags["--cluster-signing-cert-file"], flags["--cluster-signing-key-file"]) == (
        "/pki/ca.crt",
        "/pki/ca.key",
    )
    assert flags["--service-account-private-key-file"] == "/pki/sa.key"
    assert flags["--node-monitor-grace-period"] == "10s"
    assert "-nodeipam" in flags["--controllers"].split(",")


def test_scheduler_takes_the_controllers_size() -> None:
    flags = _flags(control_plane.scheduler_args(Path("/kc"), 10259, ControlPlaneSize.large()))
    assert flags["--kubeconfig"] == "/kc"
    assert flags["--secure-port"] == "10259"
    assert flags["--leader-elect"] == "false"
    assert (flags["--kube-api-qps"], flags["--kube-api-burst"]) == ("500", "1000")


def test_issued_apiserver_cert_covers_the_kubernetes_service_ip(tmp_path: Path) -> None:
    ca = pki.CertificateAuthority.create(tmp_path)
    certs = control_plane.issue_certs(ca, tmp_path, ("127.0.0.1", "198.18.0.9"))
    assert certs.ca == ca.pair
    for pair in (certs.serving, certs.kubelet_client, certs.kubelet_serving, certs.front_proxy):
        assert pair.cert.is_file() and pair.key.is_file()
    serving = x509.load_pem_x509_certificate(certs.serving.cert.read_bytes())
    ips = {
        str(ip)
        for ip in serving.extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value.get_values_for_type(x509.IPAddress)
    }
    assert KUBERNETES_SERVICE_IP in ips
    kubelet = x509.load_pem_x509_certificate(certs.kubelet_serving.cert.read_bytes())
    kubelet_ips = kubelet.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.IPAddress)
    assert "198.18.0.9" in {str(ip) for ip in kubelet_ips}


def test_cluster_state_round_trips_through_the_state_file(tmp_path: Path) -> None:
    state = ClusterState(
        name="c",
        server="https://127.0.0.1:1",
        kubeconfig=tmp_path / "kubeconfig",
        ca_cert=tmp_path / "ca.crt",
        admin=_pair("admin"),
        processes=[Process(name="etcd", pid=123, binary="/bin/etcd", log=tmp_path / "etcd.log", started=7)],
        gpu_nodes=["c-gpu-0"],
        kubelet_net=KubeletNet(netns="vk-c", host_link="vk-c-h", host_ip="198.18.0.1", ns_ip="198.18.0.2"),
        kubelet_serving=_pair("kubelet-serving"),
    )
    state.save(tmp_path)
    assert ClusterState.load(tmp_path) == state
    assert ClusterState.load(tmp_path / "missing") is None


def test_a_saved_cluster_loads_back_with_what_stopping_it_needs(tmp_path: Path) -> None:
    from vkprovider.devcluster.cluster import Cluster

    cluster = Cluster(
        name="c",
        workdir=tmp_path,
        server="https://127.0.0.1:1",
        kubeconfig=tmp_path / "kubeconfig",
        ca_cert=tmp_path / "ca.crt",
        admin=_pair("admin"),
        processes=[Process(name="kwok", pid=9, binary="/bin/kwok", log=tmp_path / "kwok.log")],
        gpu_nodes=["c-gpu-0", "c-gpu-1"],
        kubelet_serving=_pair("kubelet-serving"),
    )
    cluster.save()
    assert Cluster.load(tmp_path) == cluster
