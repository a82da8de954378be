"""``vkprovider approve-csr`` approves only the node's own kubelet-serving CSR: real requests made
by the service's own CSR builder, then every way one can differ from it is refused."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vkprovider.cli.approve_csr import problems
from vkprovider.http.kubelet_cert import _csr

NODE, IP = "vk-external", "10.0.3.17"
SA = "system:serviceaccount:vkprovider-system:vkprovider"


def csr_object(request_pem: bytes, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "vkprovider-vk-external-abc", "labels": {"vkprovider.io/node-name": NODE}},
        "spec": {
            "request": base64.b64encode(request_pem).decode(),
            "signerName": "kubernetes.io/kubelet-serving",
            "usages": ["digital signature", "server auth"],
            "username": SA,
            **spec,
        },
    }


def ours(addresses: list[str] | None = None) -> bytes:
    return _csr(NODE, addresses or [IP], ec.generate_private_key(ec.SECP256R1()))


def custom(cn: str, sans: list[x509.GeneralName], org: str = "system:nodes") -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    )
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(name)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    return request.public_bytes(serialization.Encoding.PEM)


def check(csr: dict[str, Any], ips: tuple[str, ...] = (IP,)) -> list[str]:
    return problems(csr, node=NODE, requester=SA, ips=ips)


def test_the_services_own_request_is_approved() -> None:
    assert check(csr_object(ours())) == []
    with_key_encipherment = csr_object(
        ours(), usages=["digital signature", "key encipherment", "server auth"]
    )
    assert check(with_key_encipherment) == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"username": "system:serviceaccount:default:attacker"}, "requested by"),
        ({"signerName": "kubernetes.io/kube-apiserver-client"}, "signer"),
        ({"usages": ["digital signature", "client auth"]}, "usages"),
        ({"usages": ["digital signature", "server auth", "client auth"]}, "usages"),
    ],
)
def test_a_wrong_requester_signer_or_usage_is_refused(change: dict[str, Any], reason: str) -> None:
    found = check(csr_object(ours(), **change))
    assert found and reason in " ".join(found)


def test_another_nodes_label_is_refused() -> None:
    csr = csr_object(ours())
    csr["metadata"]["labels"]["vkprovider.io/node-name"] = "other"
    assert any("label" in p for p in check(csr))


def test_an_ip_that_is_not_one_of_the_pods_is_refused() -> None:
    found = check(csr_object(ours([IP, "10.9.9.9"])))
    assert found == ["IP 10.9.9.9 is not an IP of the service's pods (or --ip)"]
    assert check(csr_object(ours([IP])), ips=("10.0.3.18",)) != []  # the pod went away


@pytest.mark.parametrize(
    ("request_pem", "reason"),
    [
        (lambda: custom("system:node:real-gpu-node", [x509.DNSName(NODE)]), "subject"),
        (lambda: custom(f"system:node:{NODE}", [x509.DNSName(NODE)], org="system:masters"), "subject"),
        (lambda: custom(f"system:node:{NODE}", [x509.DNSName("kubernetes.default.svc")]), "DNS name"),
        (lambda: custom(f"system:node:{NODE}", [x509.RFC822Name("a@b.c")]), "neither"),
    ],
)
def test_a_subject_or_san_beyond_the_node_is_refused(request_pem: Any, reason: str) -> None:
    found = check(csr_object(request_pem()))
    assert found and reason in " ".join(found)


def test_a_tampered_request_is_refused() -> None:
    csr = csr_object(ours())
    pem = base64.b64decode(csr["spec"]["request"])
    der = x509.load_pem_x509_csr(pem).public_bytes(serialization.Encoding.DER)
    broken = bytearray(der)
    broken[-5] ^= 0xFF  # inside the signature
    tampered = copy.deepcopy(csr)
    tampered["spec"]["request"] = base64.b64encode(
        b"-----BEGIN CERTIFICATE REQUEST-----\n"
        + base64.encodebytes(bytes(broken))
        + b"-----END CERTIFICATE REQUEST-----\n"
    ).decode()
    found = check(tampered)
    assert found and ("signature" in " ".join(found) or "not a PEM" in " ".join(found))
