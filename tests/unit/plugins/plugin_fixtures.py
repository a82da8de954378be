"""Small adapters for the plugin unit tests: a well-behaved one and deliberately broken ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from vkprovider.plugins.api import (
    DeploymentEndpoints,
    DeploymentStatus,
    LogOptions,
    Phase,
    ProviderInfo,
)
from vkprovider.plugins.memory import InMemoryProvider


class TinyProvider(InMemoryProvider):
    """The in-memory reference provider; ``Settings`` has a required field to test validation."""

    class Settings(BaseModel):
        url: str
        price: float = 1.0

    settings: Settings

    def __init__(self, name: str, settings: Settings) -> None:
        super().__init__(name, settings)

    async def info(self) -> ProviderInfo:
        return ProviderInfo(name=self.name, adapter="tiny", version="0")


class NoSettings:
    pass


class BrokenProvider(TinyProvider):
    """Misbehaves according to ``mode``: crash, wrong type, unknown phase, oversized, foreign node."""

    mode = "crash"

    async def get(self, uid: str) -> Any:
        if self.mode == "crash":
            raise KeyError("boom")
        if self.mode == "type":
            return {"uid": uid, "phase": "Running"}
        if self.mode == "phase":
            return DeploymentStatus.model_construct(uid=uid, phase="Exploded")
        if self.mode == "oversized":
            return DeploymentStatus(uid=uid, phase=Phase.RUNNING, message="x" * (5 * 1024 * 1024))
        if self.mode == "uid":
            return DeploymentStatus(uid="someone-else", phase=Phase.RUNNING)
        if self.mode == "endpoints":
            return DeploymentStatus(
                uid=uid,
                phase=Phase.RUNNING,
                endpoints=DeploymentEndpoints(uid="another-pod", addresses=["x"]),
            )
        raise AssertionError(self.mode)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        return [DeploymentStatus(uid="u", phase=Phase.RUNNING, node_name="another-node")]

    async def offers(self) -> Any:
        return "not a list"

    async def watch(self, node_name: str) -> AsyncIterator[Any]:
        yield DeploymentStatus(uid="u", phase=Phase.PENDING, node_name=node_name)
        yield "garbage"

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        yield b"a" * (2 * 1024 * 1024 + 5)
        await asyncio.sleep(0)
        raise RuntimeError("log stream broke")
