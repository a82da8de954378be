"""The ``kubelet:`` config section: served only with a certificate pair, files must exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from vkprovider.config import Settings


def test_off_by_default_and_on_with_a_pair(tmp_path: Path) -> None:
    assert not Settings().kubelet.enabled
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("x")
    key.write_text("x")
    on = Settings(kubelet={"tls_cert_file": str(cert), "tls_key_file": str(key)})
    assert on.kubelet.enabled and not on.kubelet.anonymous
    assert Settings(kubelet={"csr": True}).kubelet.enabled


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"tls_cert_file": "CERT"}, "tls_key_file"),
        ({"tls_cert_file": "CERT", "tls_key_file": "/nonexistent/tls.key"}, "tls_key_file"),
        (
            {"tls_cert_file": "CERT", "tls_key_file": "CERT", "client_ca_file": "/nope/ca.crt"},
            "client_ca_file",
        ),
        ({"token_cache_seconds": -1}, "token_cache_seconds"),
        ({"anonymus": True}, "anonymus"),
        ({"csr": True, "tls_cert_file": "CERT", "tls_key_file": "CERT"}, "csr"),
    ],
)
def test_bad_sections_name_the_field(tmp_path: Path, section: dict[str, object], field: str) -> None:
    cert = tmp_path / "tls.crt"
    cert.write_text("x")
    section = {k: (str(cert) if v == "CERT" else v) for k, v in section.items()}
    with pytest.raises(ValidationError) as err:
        Settings(kubelet=section)
    assert field in str(err.value)
