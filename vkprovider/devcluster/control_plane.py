"""The control-plane components' certificates and command lines, apart from starting them.

:class:`~vkprovider.devcluster.cluster.Cluster` only spawns what these return and waits. Kept
as pure functions of ports, paths and certificates (:func:`issue_certs` is the one that writes
files) so a flag that goes missing — the service CIDR the data path routes, the audit flags a
test reads back, etcd's ports — fails a unit test instead of a cluster boot minutes later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vkprovider.devcluster import pki
from vkprovider.devcluster.datapath import KUBERNETES_SERVICE_IP, SERVICE_CIDR
from vkprovider.devcluster.sizing import ControlPlaneSize

#: What the controller-manager runs: everything but the cloud- and node-IPAM controllers a
#: loopback cluster has no use for.
CONTROLLERS = "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route"


@dataclass(frozen=True)
class ControlPlaneCerts:
    """The certificates the components are started with (all issued by the cluster's CA)."""

    ca: pki.CertPair
    serving: pki.CertPair  #: the apiserver's serving cert
    kubelet_client: pki.CertPair  #: the apiserver's client cert towards kubelets
    kubelet_serving: pki.CertPair  #: the virtual node's kubelet serving cert
    front_proxy: pki.CertPair  #: the aggregation layer's client cert (metrics-server)
    service_account: pki.CertPair  #: the ServiceAccount token signing key pair


def issue_certs(
    ca: pki.CertificateAuthority, pki_dir: Path, kubelet_ips: tuple[str, ...]
) -> ControlPlaneCerts:
    """Issue every certificate under ``pki_dir``; ``kubelet_ips``: where the virtual node's
    kubelet serves (loopback, and its network namespace address when there is one)."""
    serving = ca.issue(
        pki_dir,
        "apiserver",
        "kube-apiserver",
        server=True,
        dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        ip_addresses=("127.0.0.1", KUBERNETES_SERVICE_IP),
    )
    kubelet_client = ca.issue(
        pki_dir,
        "apiserver-kubelet-client",
        "kube-apiserver-kubelet-client",
        organization="system:masters",
        client=True,
    )
    kubelet_serving = ca.issue(
        pki_dir, "kubelet-serving", "system:node:vk", server=True, ip_addresses=kubelet_ips
    )
    # for metrics-server on the same address, if a test starts it (devcluster.metrics_server)
    ca.issue(
        pki_dir,
        "metrics-server",
        "metrics-server",
        server=True,
        dns_names=("metrics-server.kube-system.svc",),
        ip_addresses=kubelet_ips,
    )
    front_proxy = ca.issue(pki_dir, "front-proxy-client", "front-proxy-client", client=True)
    return ControlPlaneCerts(
        ca=ca.pair,
        serving=serving,
        kubelet_client=kubelet_client,
        kubelet_serving=kubelet_serving,
        front_proxy=front_proxy,
        service_account=pki.service_account_keys(pki_dir),
    )


def etcd_args(data_dir: Path, client_port: int, peer_port: int, size: ControlPlaneSize) -> list[str]:
    """A single-member etcd on loopback; no fsync (a dev cluster's data is thrown away)."""
    return [
        "--name=default",
        f"--data-dir={data_dir}",
        f"--listen-client-urls=http://127.0.0.1:{client_port}",
        f"--advertise-client-urls=http://127.0.0.1:{client_port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
        "--unsafe-no-fsync",
        "--log-level=warn",
        *size.etcd_args(),
    ]


def apiserver_args(
    etcd_client_port: int,
    api_port: int,
    certs: ControlPlaneCerts,
    size: ControlPlaneSize,
    audit: Sequence[str] = (),
) -> list[str]:
    """kube-apiserver on ``127.0.0.1:api_port``; ``audit``: the flags from
    :func:`vkprovider.devcluster.audit.apiserver_args` when requests are audited."""
    return [
        f"--etcd-servers=http://127.0.0.1:{etcd_client_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}",
        f"--tls-cert-file={certs.serving.cert}",
        f"--tls-private-key-file={certs.serving.key}",
        f"--client-ca-file={certs.ca.cert}",
        f"--kubelet-client-certificate={certs.kubelet_client.cert}",
        f"--kubelet-client-key={certs.kubelet_client.key}",
        f"--kubelet-certificate-authority={certs.ca.cert}",
        "--kubelet-preferred-address-types=InternalIP",
        # the aggregation layer (metrics-server): authenticate to it as front-proxy-client
        f"--requestheader-client-ca-file={certs.ca.cert}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={certs.front_proxy.cert}",
        f"--proxy-client-key-file={certs.front_proxy.key}",
        "--enable-aggregator-routing=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={certs.service_account.cert}",
        f"--service-account-signing-key-file={certs.service_account.key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        "--profiling=false",
        "--v=1",
        *size.apiserver_args(),
        *audit,
    ]


def _loopback_component(kubeconfig: Path, port: int) -> list[str]:
    """What the controller-manager and the scheduler share: the admin kubeconfig for talking,
    authenticating and authorizing, a secure port on loopback, one instance (no election)."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
    ]


def controller_manager_args(
    kubeconfig: Path, port: int, certs: ControlPlaneCerts, size: ControlPlaneSize
) -> list[str]:
    """kube-controller-manager, signing with the cluster's CA; node health is checked every 2 s
    (10 s grace) so an outage test sees a NotReady node quickly."""
    return [
        *_loopback_component(kubeconfig, port),
        f"--service-account-private-key-file={certs.service_account.key}",
        f"--root-ca-file={certs.ca.cert}",
        f"--cluster-signing-cert-file={certs.ca.cert}",
        f"--cluster-signing-key-file={certs.ca.key}",
        "--use-service-account-credentials=false",
        f"--controllers={CONTROLLERS}",
        "--node-monitor-period=2s",
        "--node-monitor-grace-period=10s",
        # HPAs every 5 s, not 15: the simulated day is compressed (metrics-server scrapes every 10 s)
        "--horizontal-pod-autoscaler-sync-period=5s",
        "--v=1",
        *size.controllers_args(),
    ]


def scheduler_args(kubeconfig: Path, port: int, size: ControlPlaneSize) -> list[str]:
    """kube-scheduler, one instance (no leader election)."""
    return [
        *_loopback_component(kubeconfig, port),
        "--v=1",
        *size.controllers_args(),
    ]
