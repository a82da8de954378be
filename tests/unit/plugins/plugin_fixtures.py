"""Small adapters for the plugin unit tests: a well-behaved one and deliberately broken ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from vkprovider.plugins.api import (
    DeploymentRequest,
    DeploymentStatus,
    LogOptions,
    NotFound,
    Offer,
    Phase,
    ProviderInfo,
)


class TinyProvider:
    """In-memory, contract-abiding; ``Settings`` has a required field to test validation."""

    class Settings(BaseModel):
        url: str
        price: float = 1.0

    def __init__(self, name: str, settings: Settings) -> None:
        self._name = name
        self.settings = settings
        self.deployments: dict[str, DeploymentStatus] = {}

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        return ProviderInfo(name=self._name, adapter="tiny", version="0")

    async def probe(self) -> None:
        return None

    async def offers(self) -> list[Offer]:
        return []

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        return self.deployments.setdefault(
            request.uid, DeploymentStatus(uid=request.uid, phase=Phase.PENDING, node_name=request.node_name)
        )

    async def get(self, uid: str) -> DeploymentStatus:
        if uid not in self.deployments:
            raise NotFound(uid)
        return self.deployments[uid]

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        return [s for s in self.deployments.values() if s.node_name == node_name]

    async def delete(self, uid: str) -> None:
        self.deployments.pop(uid, None)

    async def close(self) -> None:
        return None


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
