"""The guard turns adapter bugs into logged ``Transient`` errors, in-process and over gRPC."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from plugin_fixtures import BrokenProvider, TinyProvider

from vkprovider.models import ContainerStatus, DeploymentStatus, Phase
from vkprovider.plugins import guard as guard_module
from vkprovider.plugins.api import LogOptions, NotFound, SupportsLogs, SupportsWatch, Transient
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.guard import LOG_CHUNK_BYTES, MAX_MESSAGE_BYTES, guard


def broken(mode: str) -> BrokenProvider:
    provider = BrokenProvider("broken-1", TinyProvider.Settings(url="u"))
    provider.mode = mode
    return provider


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("crash", "unexpected KeyError"),
        ("type", "expected DeploymentStatus"),
        ("phase", "unknown phase 'Exploded'"),
        ("oversized", "oversized"),
        ("uid", "someone-else"),
        ("endpoints", "carries the endpoints of 'another-pod'"),
    ],
)
async def test_bad_replies_become_transient_and_are_logged(
    mode: str, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.ERROR, logger="vkprovider.plugins.guard"),
        pytest.raises(Transient) as caught,
    ):
        await guard(broken(mode)).get("u1")
    assert says in caught.value.message and caught.value.provider == "broken-1"
    assert any("broken-1" in r.getMessage() and says in r.getMessage() for r in caplog.records)


async def test_list_with_another_nodes_deployment_is_rejected() -> None:
    with pytest.raises(Transient, match="another-node"):
        await guard(broken("crash")).list("my-node")


async def test_offers_must_be_a_list_of_offers() -> None:
    with pytest.raises(Transient, match="list of Offer"):
        await guard(broken("crash")).offers()


async def test_provider_errors_pass_through_with_the_provider_name() -> None:
    with pytest.raises(NotFound) as caught:
        await guard(TinyProvider("tiny-1", TinyProvider.Settings(url="u"))).get("nope")
    assert caught.value.provider == "tiny-1"


async def test_capabilities_follow_the_adapter() -> None:
    tiny = guard(TinyProvider("t", TinyProvider.Settings(url="u")))
    assert not isinstance(tiny, SupportsWatch) and not isinstance(tiny, SupportsLogs)
    both = guard(broken("crash"))
    assert isinstance(both, SupportsWatch) and isinstance(both, SupportsLogs)
    assert guard(both) is both


async def test_streams_are_checked_and_large_chunks_split() -> None:
    provider = guard(broken("crash"))
    assert isinstance(provider, SupportsWatch) and isinstance(provider, SupportsLogs)
    stream = provider.watch("n")
    assert (await anext(stream)).uid == "u"
    with pytest.raises(Transient, match="expected DeploymentStatus"):
        await anext(stream)
    chunks: list[bytes] = []
    with pytest.raises(Transient, match="RuntimeError"):
        async for chunk in provider.logs("u", LogOptions()):
            chunks.append(chunk)
    assert [len(c) for c in chunks] == [LOG_CHUNK_BYTES, LOG_CHUNK_BYTES, 5]


@pytest.mark.parametrize(
    ("mode", "says"), [("crash", "KeyError"), ("phase", "Exploded"), ("oversized", "oversized")]
)
async def test_a_broken_adapter_behind_grpc_reaches_the_host_as_transient(
    mode: str, says: str, tmp_path: Path
) -> None:
    server = await serve_adapter(broken(mode), f"unix:{tmp_path}/p.sock")
    # Generous deadlines: on a loaded 2-core runner the first connection's handshake can take
    # seconds, and a timed-out connect is also Transient -- so the message is checked too.
    client = GrpcProvider.dial("remote", server.address, call_timeout=30)
    try:
        async with asyncio.timeout(60):
            with pytest.raises(Transient, match=says):
                await client.get("u1")
            await client.probe()  # the plugin keeps serving
    finally:
        await client.close()
        await server.stop(0)


class ListingProvider(TinyProvider):
    """Lists whatever the test puts in ``listed`` (the same objects every time, like memory)."""

    listed: list[DeploymentStatus]

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        return self.listed


async def test_an_idle_list_is_not_serialised_again_but_a_changed_status_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sized: list[str] = []
    real = guard_module._check_size
    monkeypatch.setattr(
        guard_module, "_check_size", lambda model, what: (sized.append(what), real(model, what))
    )
    provider = ListingProvider("tiny-1", TinyProvider.Settings(url="u"))
    provider.listed = [DeploymentStatus(uid=f"u{i}", phase=Phase.RUNNING, node_name="n") for i in range(3)]
    guarded = guard(provider)
    assert len(await guarded.list("n")) == 3 and len(sized) == 3
    await guarded.list("n")
    provider.listed = [s.model_copy() for s in provider.listed]  # equal copies (a parsed reply)
    await guarded.list("n")
    assert len(sized) == 3  # unchanged: sized once
    huge = "x" * (MAX_MESSAGE_BYTES + 1)
    provider.listed[1] = provider.listed[1].model_copy(update={"message": huge})
    with pytest.raises(Transient, match="oversized"):
        await guarded.list("n")
    # The same object grown in place (its one mutable field) is a changed status too.
    provider.listed = [DeploymentStatus(uid="u0", phase=Phase.RUNNING, node_name="n")]
    await guarded.list("n")
    provider.listed[0].containers.extend(ContainerStatus(name=huge) for _ in range(1))
    with pytest.raises(Transient, match="oversized"):
        await guarded.list("n")
    # The node and phase checks run on every status, unchanged or not.
    provider.listed = [DeploymentStatus(uid="u0", phase=Phase.RUNNING, node_name="n")]
    await guarded.list("n")
    with pytest.raises(Transient, match="of node 'n'"):
        await guarded.list("other")
