"""``kubelet.limits`` / ``http.limits`` and the admin API's serving pair in the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.config import Settings, load_settings
from vkprovider.errors import ConfigError


def _load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_settings(path)


def test_defaults_and_a_partial_override_keeps_each_servers_other_defaults(tmp_path: Path) -> None:
    s = load_settings(None)
    assert (s.kubelet.limits.max_connections, s.kubelet.limits.max_connections_per_peer) == (512, 256)
    assert (s.http.limits.max_connections, s.http.limits.max_connections_per_peer) == (128, 32)
    assert s.kubelet.limits.max_body_bytes == 1024 * 1024 and s.http.limits.request_timeout_seconds == 15
    s = _load(tmp_path, "http:\n  limits:\n    max_body_bytes: 2048\n")
    assert s.http.limits.max_body_bytes == 2048 and s.http.limits.max_connections == 128


def test_bad_limits_and_half_a_serving_pair_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "kubelet:\n  limits:\n    max_connections: 10\n    max_connections_per_peer: 20\n")
    assert "kubelet.limits" in str(err.value) and "must not exceed max_connections" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "http:\n  limits:\n    request_timeout_seconds: 0\n")
    assert "http.limits.request_timeout_seconds" in str(err.value)
    cert = tmp_path / "tls.crt"
    cert.write_text("x")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, f"http:\n  tls_cert_file: {cert}\n")
    assert "http.tls_key_file" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, f"http:\n  tls_cert_file: {cert}\n  tls_key_file: {tmp_path / 'missing.key'}\n")
    assert "http.tls_key_file" in str(err.value) and "no such file" in str(err.value)
