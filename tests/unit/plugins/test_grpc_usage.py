"""Usage figures cross the gRPC boundary unchanged; a plugin without ``metrics`` reads as "no usage"."""

from __future__ import annotations

import builtins
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vkprovider.errors import InvalidRequest
from vkprovider.http.kubelet_stats import UsageCollector, reported_usage
from vkprovider.models import Capabilities, ContainerUsage, DeploymentUsage, ProviderInfo
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc import convert
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.guard import guard
from vkprovider.plugins.memory import InMemoryProvider

AT = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
USAGE = [
    DeploymentUsage(
        uid="u1",
        timestamp=AT,
        containers=[
            ContainerUsage(
                name="main", cpu_seconds_total=12.5, cpu_cores=0.75, memory_working_set_bytes=2**31
            ),
            ContainerUsage(name="side", cpu_seconds_total=0.0, memory_working_set_bytes=0),
        ],
    ),
    DeploymentUsage(uid="u2", timestamp=AT),
]


class Metered(InMemoryProvider):
    """Declares ``metrics`` and reports fixed figures for node ``n1`` only."""

    def __init__(self) -> None:
        super().__init__("metered")
        self.asked: builtins.list[str] = []

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self.name, adapter="metered", version="0", capabilities=Capabilities(metrics=True)
        )

    async def usage(self, node_name: str) -> builtins.list[DeploymentUsage]:
        self.asked.append(node_name)
        return USAGE if node_name == "n1" else []


def test_usage_round_trip_keeps_every_field() -> None:
    assert [convert.usage_from_pb(convert.usage_to_pb(u)) for u in USAGE] == USAGE
    wire = convert.usage_to_pb(USAGE[0])
    assert wire.containers[0].HasField("cpu_cores")
    assert not wire.containers[1].HasField("cpu_cores")  # "unknown rate" stays unknown, not 0


def test_usage_without_timestamp_or_with_negative_cpu_is_malformed() -> None:
    with pytest.raises(convert.MalformedReply, match="timestamp"):
        convert.usage_from_pb(pb.DeploymentUsage(uid="u"))
    bad = convert.usage_to_pb(USAGE[0])
    bad.containers[0].cpu_seconds_total = -1.0
    with pytest.raises(convert.MalformedReply, match="cpu_seconds_total"):
        convert.usage_from_pb(bad)


async def test_a_metered_plugin_reports_the_same_usage_as_in_process(tmp_path: Path) -> None:
    adapter = Metered()
    server = await serve_adapter(adapter, f"unix:{tmp_path}/p.sock")
    client = GrpcProvider.dial("metered", server.address)
    try:
        assert await client.usage("n1") == await guard(Metered()).usage("n1")  # type: ignore[attr-defined]
        assert await client.usage("n2") == []
        assert await reported_usage(guard(client), "n1") == USAGE
        collector = UsageCollector("n1")
        found, failed = await collector.collect(
            {"metered": guard(client)}, {"u1": {"metadata": {"uid": "u1"}}}
        )
        assert [f.usage for f in found] == USAGE[:1] and not failed
        assert collector.node_cpu_seconds == pytest.approx(12.5)
    finally:
        await client.close()
        await server.stop(0)
    assert adapter.asked == ["n1", "n2", "n1", "n1"]


async def test_a_plugin_without_metrics_answers_unimplemented_and_reports_no_usage(tmp_path: Path) -> None:
    server = await serve_adapter(InMemoryProvider("plain"), f"unix:{tmp_path}/p.sock")
    client = GrpcProvider.dial("plain", server.address)
    try:
        with pytest.raises(InvalidRequest, match="no metrics capability"):
            await client.usage("n1")
        assert await reported_usage(guard(client), "n1") is None
        found, failed = await UsageCollector("n1").collect({"plain": guard(client)}, {"u1": {}})
        assert found == [] and not failed  # "does not report usage", not a scrape error
    finally:
        await client.close()
        await server.stop(0)
