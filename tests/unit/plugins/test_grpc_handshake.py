"""The handshake line and the local-only address rule."""

from __future__ import annotations

import pytest

from vkprovider.plugins.grpc.handshake import HandshakeError, format_handshake, is_handshake, parse_handshake


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("unix:/tmp/p.sock", "unix:/tmp/p.sock"),
        ("unix:///tmp/p.sock", "unix:/tmp/p.sock"),
        ("127.0.0.1:5000", "127.0.0.1:5000"),
        ("localhost:1", "localhost:1"),
        ("[::1]:65535", "[::1]:65535"),
    ],
)
def test_round_trip(address: str, target: str) -> None:
    line = format_handshake(address)
    assert is_handshake(line)
    assert parse_handshake(line + "\n").address == target


@pytest.mark.parametrize(
    "line",
    [
        "vkprovider-plugin|1|10.0.0.5:5000",
        "vkprovider-plugin|1|example.com:443",
        "vkprovider-plugin|1|unix:relative.sock",
        "vkprovider-plugin|1|127.0.0.1:0",
        "vkprovider-plugin|1|127.0.0.1:http",
        "vkprovider-plugin|2|127.0.0.1:5000",
        "plugin ready on 127.0.0.1:5000",
        "vkprovider-plugin|1",
    ],
)
def test_rejects_remote_malformed_or_other_versions(line: str) -> None:
    with pytest.raises(HandshakeError):
        parse_handshake(line)
