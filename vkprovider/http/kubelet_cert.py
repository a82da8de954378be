"""The kubelet API's serving certificate from a ``kubernetes.io/kubelet-serving`` CSR.

Like the kubelet with ``serverTLSBootstrap``: a fresh EC key, a CSR for ``system:node:<node>``
(group ``system:nodes``) with the node's addresses as SANs, and the certificate the
controller-manager's signer issues once the CSR is approved (the cluster's approver, or an
operator: ``kubectl certificate approve``; kubelet-serving CSRs are not auto-approved). The key
never leaves this process's directory (mode 0600). Renewal starts at 70 % of the lifetime; the
running server's ``SSLContext`` loads the new pair, so new connections get it without a restart.

A pair already in the directory is reused at start (:func:`reusable_pair`) when it is still
valid, its key matches, and it names this node and its addresses: a restart (upgrade,
``rollout restart``, a crash) posts no new CSR for someone to approve. The key is written before
the certificate, so a crash between the two leaves a mismatched pair, which is not reused.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import logging
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vkprovider.http.auth import Reviewer

log = logging.getLogger(__name__)

SIGNER = "kubernetes.io/kubelet-serving"
RENEW_AT = 0.7


@dataclass(frozen=True)
class ServingPair:
    cert: Path
    key: Path
    not_before: datetime.datetime
    not_after: datetime.datetime

    def renew_after(self) -> datetime.datetime:
        return self.not_before + (self.not_after - self.not_before) * RENEW_AT


def _csr(node: str, addresses: list[str], key: ec.EllipticCurvePrivateKey) -> bytes:
    sans: list[x509.GeneralName] = [x509.DNSName(node)]
    for address in addresses:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            sans.append(x509.DNSName(address))
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                    x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}"),
                ]
            )
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    return request.public_bytes(serialization.Encoding.PEM)


async def request_serving_cert(
    kube: Reviewer, node: str, addresses: list[str], directory: Path, *, poll_seconds: float = 2.0
) -> ServingPair:
    """Create the CSR and wait until it is approved and issued; write key and cert files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = f"vkprovider-{node}-{uuid.uuid4().hex[:10]}"[-253:]
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "labels": {"vkprovider.io/node-name": node}},
        "spec": {
            "request": base64.b64encode(_csr(node, addresses, key)).decode(),
            "signerName": SIGNER,
            "usages": ["digital signature", "server auth"],
        },
    }
    await kube.request("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", body=body)
    log.info("kubelet serving certificate: CSR %s created; waiting for approval and signing", name)
    while True:
        csr = await kube.request("GET", f"/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}")
        status = csr.get("status", {}) if isinstance(csr, dict) else {}
        denied = [c for c in status.get("conditions", []) if c.get("type") in ("Denied", "Failed")]
        if denied:
            raise RuntimeError(f"CSR {name} {denied[0]['type'].lower()}: {denied[0].get('message', '')}")
        if status.get("certificate"):
            break
        await asyncio.sleep(poll_seconds)
    pem = base64.b64decode(status["certificate"])
    cert = x509.load_pem_x509_certificate(pem)
    key_path, cert_path = await asyncio.to_thread(_write, directory, key, pem)
    log.info(
        "kubelet serving certificate issued by %s, valid until %s",
        cert.issuer.rfc4514_string(),
        cert.not_valid_after_utc.isoformat(),
    )
    return ServingPair(cert_path, key_path, cert.not_valid_before_utc, cert.not_valid_after_utc)


KEY_FILE, CERT_FILE = "kubelet-serving.key", "kubelet-serving.crt"


def reusable_pair(
    node: str, addresses: list[str], directory: Path, *, now: datetime.datetime | None = None
) -> ServingPair | None:
    """The pair in ``directory`` if it can serve this node now, else None (the reason is logged).

    Checked: both files parse; the key is the certificate's; it is valid now; its subject is
    ``system:node:<node>``; its SANs hold the node name and every address.
    """
    key_path, cert_path = directory / KEY_FILE, directory / CERT_FILE
    if not (key_path.is_file() and cert_path.is_file()):
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        log.info("kubelet serving certificate in %s not reused: unreadable (%s)", directory, exc)
        return None
    problem = _mismatch(cert, key, node, addresses, now or datetime.datetime.now(datetime.UTC))
    if problem:
        log.info("kubelet serving certificate in %s not reused: %s; requesting a new one", directory, problem)
        return None
    log.info(
        "kubelet serving certificate in %s reused (valid until %s)",
        directory,
        cert.not_valid_after_utc.isoformat(),
    )
    return ServingPair(cert_path, key_path, cert.not_valid_before_utc, cert.not_valid_after_utc)


def _mismatch(
    cert: x509.Certificate, key: object, node: str, addresses: list[str], now: datetime.datetime
) -> str:
    public = getattr(key, "public_key", None)
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if public is None or public().public_bytes(*der) != cert.public_key().public_bytes(*der):
        return "the key does not match the certificate"
    if not cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
        return f"not valid now (valid {cert.not_valid_before_utc.isoformat()} to {cert.not_valid_after_utc.isoformat()})"
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if names != [f"system:node:{node}"]:
        return f"its subject is {cert.subject.rfc4514_string()}, not CN=system:node:{node}"
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "it has no subject alternative names"
    dns, ips = set(sans.get_values_for_type(x509.DNSName)), set(sans.get_values_for_type(x509.IPAddress))
    missing = [node] if node not in dns else []
    for address in addresses:
        try:
            if ipaddress.ip_address(address) not in ips:
                missing.append(address)
        except ValueError:
            if address not in dns:
                missing.append(address)
    return f"its names do not include {', '.join(missing)}" if missing else ""


async def serving_pair(kube: Reviewer, node: str, addresses: list[str], directory: Path) -> ServingPair:
    """The pair to serve with: the one in ``directory`` if reusable, else a new CSR's."""
    pair = await asyncio.to_thread(reusable_pair, node, addresses, directory)
    return pair if pair is not None else await request_serving_cert(kube, node, addresses, directory)


def _write(directory: Path, key: ec.EllipticCurvePrivateKey, pem: bytes) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_path, cert_path = directory / KEY_FILE, directory / CERT_FILE
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    cert_path.write_bytes(pem)
    return key_path, cert_path


async def keep_renewed(
    kube: Reviewer,
    node: str,
    addresses: list[str],
    directory: Path,
    pair: ServingPair,
    context: ssl.SSLContext,
) -> None:
    """Renew before expiry, forever; the server's context loads each new pair."""
    while True:
        wait = (pair.renew_after() - datetime.datetime.now(datetime.UTC)).total_seconds()
        await asyncio.sleep(max(1.0, wait))
        pair = await request_serving_cert(kube, node, addresses, directory)
        context.load_cert_chain(str(pair.cert), str(pair.key))
        log.info("kubelet serving certificate renewed")
