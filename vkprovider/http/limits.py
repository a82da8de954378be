"""How much one server lets its callers hold: connections, time, header and body bytes.

Each held connection costs memory before any credential is checked (a TLS connection alone
holds a 256 KiB read buffer in asyncio's ``SSLProtocol``), so the caps are taken when the TCP
connection is accepted, before the TLS handshake, in total and per peer address; a connection
past them is closed at once. A connection then has ``tls_handshake_timeout_seconds`` for its
handshake and ``request_timeout_seconds`` to send one complete request (headers and body), and
``keep_alive_timeout_seconds`` of idleness after a response before it is closed. Request heads
over ``max_header_bytes`` get a 400, bodies over ``max_body_bytes`` a 413 naming the limit.

The kubelet API and the admin API each have their own limits (``kubelet.limits``,
``http.limits``; docs/kubelet-api.md), so a flood of one port does not close the other.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field, model_validator

MIB = 1024 * 1024


class ServerLimits(BaseModel):
    """Per-server caps; the defaults suit the kubelet API (the apiserver and metrics-server)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_connections: int = Field(default=512, ge=1, description="open connections, TLS handshakes included")
    max_connections_per_peer: int = Field(default=256, ge=1, description="open connections from one address")
    tls_handshake_timeout_seconds: float = Field(default=10.0, gt=0)
    request_timeout_seconds: float = Field(
        default=15.0, gt=0, description="to send one complete request, from connect or the previous response"
    )
    keep_alive_timeout_seconds: float = Field(default=5.0, gt=0, description="idle time after a response")
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, description="request line and headers")
    max_body_bytes: int = Field(default=MIB, ge=0)

    @model_validator(mode="after")
    def _per_peer_within_total(self) -> ServerLimits:
        if self.max_connections_per_peer > self.max_connections:
            raise ValueError(
                f"max_connections_per_peer ({self.max_connections_per_peer}) must not exceed "
                f"max_connections ({self.max_connections})"
            )
        return self


class AdminServerLimits(ServerLimits):
    """The admin API's defaults: probes, Prometheus and an operator need few connections."""

    max_connections: int = Field(default=128, ge=1, description="open connections, TLS handshakes included")
    max_connections_per_peer: int = Field(default=32, ge=1, description="open connections from one address")


class ConnectionCounter:
    """Open connections in total and per peer address; ``admit`` takes a slot, ``release`` frees it."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.open = 0
        self.by_peer: Counter[str] = Counter()
        self.refused = 0  #: connections closed at accept because a cap was reached (tests, bench)

    def admit(self, peer: str) -> bool:
        if (
            self.open >= self.limits.max_connections
            or self.by_peer[peer] >= self.limits.max_connections_per_peer
        ):
            self.refused += 1
            return False
        self.open += 1
        self.by_peer[peer] += 1
        return True

    def release(self, peer: str) -> None:
        self.open -= 1
        self.by_peer[peer] -= 1
        if self.by_peer[peer] <= 0:
            del self.by_peer[peer]
