"""A kubelet serving pair already in ``kubelet.cert_dir`` is reused at start when it can serve
this node (issue 29 item 3): no new CSR for each restart. Anything else posts a CSR."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vkprovider.http import kubelet_cert
from vkprovider.http.kubelet_cert import CERT_FILE, KEY_FILE, reusable_pair, serving_pair

NODE, IP = "vk-external", "10.0.3.17"
NOW = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)


def write_pair(
    directory: Path,
    *,
    cn: str = f"system:node:{NODE}",
    dns: tuple[str, ...] = (NODE,),
    ips: tuple[str, ...] = (IP,),
    not_before: datetime.datetime = NOW - datetime.timedelta(days=1),
    not_after: datetime.datetime = NOW + datetime.timedelta(days=300),
    other_key: bool = False,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    written = ec.generate_private_key(ec.SECP256R1()) if other_key else key
    directory.mkdir(parents=True, exist_ok=True)
    (directory / KEY_FILE).write_bytes(
        written.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (directory / CERT_FILE).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def test_a_valid_pair_for_this_node_is_reused(tmp_path: Path) -> None:
    write_pair(tmp_path)
    pair = reusable_pair(NODE, [IP], tmp_path, now=NOW)
    assert pair is not None and pair.cert == tmp_path / CERT_FILE and pair.key == tmp_path / KEY_FILE
    assert pair.not_after == NOW + datetime.timedelta(days=300)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"ips": ("10.0.3.99",)}, "do not include 10.0.3.17"),  # a new pod IP
        ({"dns": ("other-node",)}, "do not include vk-external"),
        ({"cn": "system:node:other-node"}, "not CN=system:node:vk-external"),
        ({"not_after": NOW - datetime.timedelta(minutes=1)}, "not valid now"),
        ({"not_before": NOW + datetime.timedelta(hours=1)}, "not valid now"),
        ({"other_key": True}, "the key does not match"),
    ],
)
def test_a_pair_that_cannot_serve_this_node_is_not_reused(
    tmp_path: Path, changes: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    write_pair(tmp_path, **changes)
    with caplog.at_level("INFO"):
        assert reusable_pair(NODE, [IP], tmp_path, now=NOW) is None
    assert reason in caplog.text


def test_missing_or_garbage_files_are_not_reused(tmp_path: Path) -> None:
    assert reusable_pair(NODE, [IP], tmp_path / "empty", now=NOW) is None
    write_pair(tmp_path)
    (tmp_path / CERT_FILE).write_text("not a certificate")
    assert reusable_pair(NODE, [IP], tmp_path, now=NOW) is None


class NoApiServer:
    """A reviewer that fails the test if a CSR is posted."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        self.calls.append(f"{method} {path}")
        raise AssertionError("no CSR expected")


async def test_serving_pair_posts_no_csr_when_the_pair_is_reusable(tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)
    write_pair(
        tmp_path, not_before=now - datetime.timedelta(days=1), not_after=now + datetime.timedelta(days=30)
    )
    kube = NoApiServer()
    pair = await serving_pair(kube, NODE, [IP], tmp_path)
    assert pair.cert == tmp_path / CERT_FILE and kube.calls == []


async def test_serving_pair_requests_a_new_one_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, list[str]]] = []

    async def request_serving_cert(kube: Any, node: str, addresses: list[str], directory: Path) -> Any:
        asked.append((node, addresses))
        return "new pair"

    monkeypatch.setattr(kubelet_cert, "request_serving_cert", request_serving_cert)
    write_pair(tmp_path, ips=("10.9.9.9",))
    assert await serving_pair(NoApiServer(), NODE, [IP], tmp_path) == "new pair"
    assert asked == [(NODE, [IP])]
