"""The one-line handshake a launched plugin prints on stdout, and address normalisation.

Format (one line, ``|``-separated, like HashiCorp go-plugin's)::

    vkprovider-plugin|1|<grpc target>

``<grpc target>`` is ``unix:/abs/path.sock`` (or ``unix:///abs/path.sock``) or
``127.0.0.1:PORT`` / ``localhost:PORT`` / ``[::1]:PORT``. The host only ever dials loopback or a
unix socket: a plugin is a local child process, not a network service. The launcher passes
``VKPROVIDER_PLUGIN_ADDRESS`` (a unix socket in a private directory) as a suggestion; the
handshake line is authoritative.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "vkprovider-plugin"
PROTOCOL_VERSION = 1
ADDRESS_ENV = "VKPROVIDER_PLUGIN_ADDRESS"

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class HandshakeError(ValueError):
    """The plugin's handshake line is malformed, of another version, or names a non-local address."""


@dataclass(frozen=True)
class Handshake:
    version: int
    address: str


def check_address(address: str) -> str:
    """Return ``address`` as a grpc target if it is a unix socket or loopback TCP; else raise."""
    if address.startswith("unix:"):
        path = address.removeprefix("unix://") if address.startswith("unix://") else address[5:]
        if not path.startswith("/"):
            raise HandshakeError(f"unix socket path must be absolute: {address!r}")
        return f"unix:{path}"
    host, sep, port = address.rpartition(":")
    if not sep or host not in _LOOPBACK_HOSTS or not port.isdigit() or not 0 < int(port) < 65536:
        raise HandshakeError(f"plugin address must be unix:/path or a loopback host:port, got {address!r}")
    return address


def format_handshake(address: str) -> str:
    return f"{PREFIX}|{PROTOCOL_VERSION}|{check_address(address)}"


def parse_handshake(line: str) -> Handshake:
    parts = line.strip().split("|")
    if len(parts) != 3 or parts[0] != PREFIX:
        raise HandshakeError(f"not a plugin handshake line: {line.strip()[:200]!r}")
    if parts[1] != str(PROTOCOL_VERSION):
        raise HandshakeError(f"plugin speaks protocol version {parts[1]!r}, host speaks {PROTOCOL_VERSION}")
    return Handshake(version=PROTOCOL_VERSION, address=check_address(parts[2]))


def is_handshake(line: str) -> bool:
    return line.startswith(PREFIX + "|")
