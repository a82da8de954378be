"""The pod's grace period crosses the gRPC boundary unchanged, and "unset" stays unset."""

from __future__ import annotations

from pathlib import Path

from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.memory import InMemoryProvider


class Recording(InMemoryProvider):
    def __init__(self) -> None:
        super().__init__("rec")
        self.deletes: list[tuple[str, float | None]] = []

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        self.deletes.append((uid, grace_period_seconds))


class Legacy(InMemoryProvider):
    """An adapter written before the grace period existed: ``delete(uid)`` only."""

    def __init__(self) -> None:
        super().__init__("legacy")
        self.deleted: list[str] = []

    async def delete(self, uid: str) -> None:  # type: ignore[override]
        self.deleted.append(uid)


async def test_grace_period_reaches_the_plugin(tmp_path: Path) -> None:
    adapter = Recording()
    server = await serve_adapter(adapter, f"unix:{tmp_path}/p.sock")
    client = GrpcProvider.dial("rec", server.address)
    try:
        await client.delete("u1", grace_period_seconds=30.0)
        await client.delete("u2")
        await client.delete("u3", grace_period_seconds=0.0)
    finally:
        await client.close()
        await server.stop(0)
    assert adapter.deletes == [("u1", 30.0), ("u2", None), ("u3", 0.0)]


async def test_an_adapter_without_the_keyword_still_deletes(tmp_path: Path) -> None:
    adapter = Legacy()
    server = await serve_adapter(adapter, f"unix:{tmp_path}/l.sock")
    client = GrpcProvider.dial("legacy", server.address)
    try:
        await client.delete("u1")
    finally:
        await client.close()
        await server.stop(0)
    assert adapter.deleted == ["u1"]


async def test_a_delete_answering_gone_crosses_the_wire_and_silence_stays_unknown(tmp_path: Path) -> None:
    gone = InMemoryProvider("gone")  # deletes at once: answers True
    quiet = Recording()  # answers nothing
    servers = [
        await serve_adapter(gone, f"unix:{tmp_path}/g.sock"),
        await serve_adapter(quiet, f"unix:{tmp_path}/q.sock"),
    ]
    clients = [GrpcProvider.dial("gone", servers[0].address), GrpcProvider.dial("rec", servers[1].address)]
    try:
        answers = [await client.delete("u1") for client in clients]
    finally:
        for client in clients:
            await client.close()
        for server in servers:
            await server.stop(0)
    assert answers == [True, None]
