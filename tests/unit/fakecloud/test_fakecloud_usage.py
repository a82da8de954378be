"""fakecloud's usage figures follow the load knob; its logs carry env names, never values."""

from __future__ import annotations

import httpx
from fakecloud_helpers import config, eventually, request
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import running_fakecloud

from vkprovider.models import LogOptions, Phase
from vkprovider.plugins.api import SupportsMetrics

NODE_OF_REQUEST = request().node_name


async def running(provider: FakeCloudProvider, uid: str) -> bool:
    return (await provider.get(uid)).phase == Phase.RUNNING


async def test_usage_follows_the_load_and_counters_only_grow(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    assert isinstance(provider, SupportsMetrics) and (await provider.info()).capabilities.metrics
    await provider.deploy(request("uid-1"))
    await provider.deploy(request("uid-2", node="other-node"))
    await eventually(lambda: running(provider, "uid-1"))
    (
        await admin.put("/load", json={"cpu_cores": 2.0, "memory_bytes": 1000, "memory_bytes_per_core": 10})
    ).raise_for_status()
    first = await eventually(provider_usage(provider))
    assert [u.uid for u in first] == ["uid-1"]  # scoped to the node asked for
    (c,) = first[0].containers
    assert c.name == "server" and c.cpu_cores == 2.0 and c.memory_working_set_bytes == 1020
    later = await eventually(grown(provider, c.cpu_seconds_total))
    (admin_load := await admin.put("/load", json={"total_cpu_cores": 4.0})).raise_for_status()
    assert admin_load.json()["total_cpu_cores"] == 4.0
    await eventually(lambda: running(provider, "uid-2"))
    shared = (await provider.usage(NODE_OF_REQUEST))[0].containers[0]
    assert shared.cpu_cores == 2.0  # 4 cores shared by the two running deployments
    assert shared.cpu_seconds_total >= later
    assert (await admin.put("/load", json={"cpu_cores": -1})).status_code == 422


def provider_usage(provider: FakeCloudProvider):  # type: ignore[no-untyped-def]
    async def check():  # type: ignore[no-untyped-def]
        found = await provider.usage(NODE_OF_REQUEST)
        return found if found and found[0].containers[0].cpu_seconds_total > 0 else None

    return check


def grown(provider: FakeCloudProvider, before: float):  # type: ignore[no-untyped-def]
    async def check():  # type: ignore[no-untyped-def]
        now = (await provider.usage(NODE_OF_REQUEST))[0].containers[0].cpu_seconds_total
        return now if now > before else None

    return check


async def test_logs_name_env_variables_and_configured_lines_without_values() -> None:
    cfg = config()
    cfg.lifecycle.log_lines = ["loading weights", "warmup done"]
    async with running_fakecloud(cfg) as server:
        provider = FakeCloudProvider("cheap", FakeCloudProvider.Settings(url=server.url, timeout_seconds=2.0))
        try:
            await provider.deploy(request("uid-9"))
            await eventually(lambda: running(provider, "uid-9"))
            text = b"".join(
                [c async for c in provider.logs("uid-9", LogOptions(container="server"))]
            ).decode()
        finally:
            await provider.close()
    assert "env: MODE TOKEN" in text and "loading weights" in text and "warmup done" in text
    assert "prod" not in text and "s3cret" not in text
