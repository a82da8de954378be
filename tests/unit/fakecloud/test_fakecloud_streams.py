"""Logs (plain, tail, limit, follow) and the NDJSON status watch, through the adapter."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fakecloud_helpers import NODE, eventually, request
from vkprovider_fakecloud.adapter import FakeCloudProvider

from vkprovider.plugins.api import DeploymentStatus, LogOptions, NotFound, Phase


async def _read_logs(provider: FakeCloudProvider, uid: str, options: LogOptions) -> str:
    async with asyncio.timeout(5):
        return b"".join([chunk async for chunk in provider.logs(uid, options)]).decode()


async def _running(provider: FakeCloudProvider, uid: str) -> DeploymentStatus:
    async def check() -> DeploymentStatus | None:
        status = await provider.get(uid)
        return status if status.ready else None

    return await eventually(check)


async def test_logs_plain_tail_limit_and_timestamps(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("logs"))
    await _running(provider, "logs")
    await admin.post("/deployments/logs/logs", json={"lines": ["hello from the model"]})
    await admin.post("/deployments/logs/finish", json={"exit_code": 0})  # freezes the log
    text = await _read_logs(provider, "logs", LogOptions())
    lines = text.splitlines()
    assert lines[0].startswith("fakecloud[fc-test]: fc-") and "a100" in lines[0]
    assert "pulling image ghcr.io/acme/llm:1" in lines
    assert "ready: serving on port 8000" in lines
    assert "hello from the model" in lines
    tail = await _read_logs(provider, "logs", LogOptions(tail_lines=2))
    assert tail.splitlines() == lines[-2:]
    assert lines[-1] == "container server exited with code 0"
    assert await _read_logs(provider, "logs", LogOptions(tail_lines=0)) == ""
    assert len(await _read_logs(provider, "logs", LogOptions(limit_bytes=10))) == 10
    stamped = (await _read_logs(provider, "logs", LogOptions(timestamps=True))).splitlines()[0]
    assert stamped[:4].isdigit() and "Z fakecloud[" in stamped


async def test_follow_streams_until_the_deployment_ends(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    await provider.deploy(request("follow"))
    await _running(provider, "follow")
    chunks: list[bytes] = []

    async def follow() -> None:
        async for chunk in provider.logs("follow", LogOptions(follow=True)):
            chunks.append(chunk)
            if b"late line" in b"".join(chunks):
                await admin.post("/deployments/follow/finish", json={"exit_code": 0})

    async with asyncio.timeout(10):
        task = asyncio.create_task(follow())
        await eventually(lambda: asyncio.sleep(0, result=bool(chunks)))
        await admin.post("/deployments/follow/logs", json={"lines": ["late line"]})
        await task  # ends by itself once the deployment is terminal
    text = b"".join(chunks).decode()
    assert "late line" in text
    assert text.rstrip().endswith("container server exited with code 0")


async def test_logs_of_unknown_deployment_or_container(provider: FakeCloudProvider) -> None:
    with pytest.raises(NotFound):
        await _read_logs(provider, "nope", LogOptions())
    await provider.deploy(request("one"))
    with pytest.raises(NotFound):
        await _read_logs(provider, "one", LogOptions(container="sidecar"))


async def test_watch_reports_transitions_and_losses(
    provider: FakeCloudProvider, admin: httpx.AsyncClient
) -> None:
    seen: list[DeploymentStatus] = []

    async def consume() -> None:
        async for status in provider.watch(NODE):
            seen.append(status)
            if status.uid == "w1" and status.ready:
                await admin.post("/deployments/w1/finish", json={"exit_code": 0})
            if status.uid == "w1" and status.phase is Phase.SUCCEEDED:
                await admin.post("/deployments/w2/lose")
            if status.uid == "w2" and status.phase is Phase.UNKNOWN:
                return

    async with asyncio.timeout(10):
        task = asyncio.create_task(consume())
        await provider.deploy(request("w1"))
        await provider.deploy(request("w2"))
        await provider.deploy(request("elsewhere", node="other", gpu="H100-SXM-80GB"))
        await task
    phases = [(s.phase, s.ready) for s in seen if s.uid == "w1"]
    assert phases[0] == (Phase.PENDING, False)
    assert (Phase.RUNNING, True) in phases
    assert phases[-1] == (Phase.SUCCEEDED, False)
    assert seen[-1].uid == "w2" and seen[-1].reason == "DeploymentLost"
    assert all(s.uid != "elsewhere" for s in seen)
