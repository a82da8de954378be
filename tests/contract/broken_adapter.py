"""A deliberately broken adapter: ``deploy`` checks, then creates, with no per-UID lock and no
"already exists" handling. Concurrent first deploys of one UID each make a deployment. The
contract suite must fail it (``test_suite_as_plugin.py``); it is not a ``harness_*`` module, so
the bundled run does not pick it up.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from harness_memory import MemoryCloudProvider, MemoryHarness

from vkprovider.contract.harness import Harness
from vkprovider.plugins.api import DeploymentRequest, DeploymentStatus, Phase


class RacyMemoryProvider(MemoryCloudProvider):
    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        existing = await self._io(self.store.read, request.uid)
        if existing is not None:
            return DeploymentStatus.model_validate(existing["status"])
        status = DeploymentStatus(
            uid=request.uid,
            phase=Phase.PENDING,
            node_name=request.node_name,
            provider_id=f"mem-{uuid.uuid4().hex[:12]}",
            reason="Provisioning",
        )
        record = {"labels": {**request.labels, **request.tags()}, "status": status.model_dump(mode="json")}
        await self._io(self.store.update, request.uid, record)  # overwrites a concurrent create
        return status


class RacyHarness(MemoryHarness):
    adapter = "broken_adapter:RacyMemoryProvider"


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    yield RacyHarness(tmp_path / "racycloud")
