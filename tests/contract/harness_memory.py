"""The reference adapter of the contract suite: a tiny "cloud" whose state is a directory.

Deployments are JSON files (one per UID), created with ``link`` so that concurrent deploys of one
UID make one deployment, and replaced atomically. Because state and knobs are files, a plugin
subprocess sees exactly what the test process sees, so every suite variant runs against it. It
implements the contract for real (idempotency, node scoping, NotFound, watch, logs); it is not a
mock of anything. It lives only in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import DelayStats, Harness, Op
from pydantic import BaseModel

from vkprovider.errors import provider_error_from_code
from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    Capabilities,
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    LogOptions,
    NoCapacity,
    NotFound,
    Offer,
    Phase,
    ProviderError,
    ProviderInfo,
)


class Store:
    """Synchronous file operations shared by the adapter and the harness knobs."""

    def __init__(self, root: Path) -> None:
        self.deployments = root / "deployments"
        self.control = root / "control"
        self.deployments.mkdir(parents=True, exist_ok=True)
        self.control.mkdir(parents=True, exist_ok=True)

    def _write(self, path: Path, data: dict[str, Any], *, exclusive: bool = False) -> bool:
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        tmp.write_text(json.dumps(data))
        try:
            if exclusive:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
            else:
                os.replace(tmp, path)
                return True
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def read(self, uid: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.deployments / f"{uid}.json").read_text())  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None

    def create(self, uid: str, record: dict[str, Any]) -> bool:
        return self._write(self.deployments / f"{uid}.json", record, exclusive=True)

    def update(self, uid: str, record: dict[str, Any]) -> None:
        self._write(self.deployments / f"{uid}.json", record)

    def delete(self, uid: str) -> None:
        (self.deployments / f"{uid}.json").unlink(missing_ok=True)

    def all(self) -> list[dict[str, Any]]:
        records = []
        for path in sorted(self.deployments.glob("*.json")):
            with contextlib.suppress(FileNotFoundError):
                records.append(json.loads(path.read_text()))
        return records

    def take(self, name: str) -> dict[str, Any] | None:
        """Consume a one-shot control file atomically (only one caller wins)."""
        claimed = self.control / f".{name}.{uuid.uuid4().hex}"
        try:
            os.rename(self.control / name, claimed)
        except FileNotFoundError:
            return None
        try:
            return json.loads(claimed.read_text())  # type: ignore[no-any-return]
        finally:
            claimed.unlink()

    def peek(self, name: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.control / name).read_text())  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None

    def put(self, name: str, data: dict[str, Any]) -> None:
        self._write(self.control / name, data)

    def bump(self, name: str) -> None:
        """Count an event by creating a uniquely named marker file."""
        (self.control / f"{name}.{uuid.uuid4().hex}").touch()

    def count(self, name: str) -> int:
        return len(list(self.control.glob(f"{name}.*")))


class MemoryCloudProvider:
    """A contract-complete adapter (logs and watch included) over a :class:`Store`."""

    class Settings(BaseModel):
        state_dir: str
        capacity: int = 1000
        poll_seconds: float = 0.02

    def __init__(self, name: str, settings: Settings) -> None:
        self._name = name
        self.settings = settings
        self.store = Store(Path(settings.state_dir))

    @property
    def name(self) -> str:
        return self._name

    async def _io(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def _knobs(self, op: str) -> None:
        delay = await self._io(self.store.peek, f"delay-{op}")
        if delay and delay["seconds"] > 0:
            await self._io(self.store.bump, f"started-{op}")
            try:
                await asyncio.sleep(delay["seconds"])
            except asyncio.CancelledError:
                await asyncio.shield(self._io(self.store.bump, f"cancelled-{op}"))
                raise
        fail = await self._io(self.store.take, f"fail-{op}")
        if fail:
            raise provider_error_from_code(fail["code"], fail["message"], retry_after=fail["retry_after"])

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name, adapter="memory", version="1", capabilities=Capabilities(logs=True, watch=True)
        )

    async def probe(self) -> None:
        await self._knobs("probe")

    async def offers(self) -> list[Offer]:
        await self._knobs("offers")
        used = len(await self._io(self.store.all))
        return [
            Offer(
                provider=self._name,
                offer_id="mem-a100",
                gpu_type="A100-SXM4-80GB",
                gpu_count=1,
                gpu_memory_gb=80,
                price_per_hour=1.5,
                capacity=max(self.settings.capacity - used, 0),
            )
        ]

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        await self._knobs("deploy")
        if not request.containers:
            raise InvalidRequest("a deployment needs at least one container")
        existing = await self._io(self.store.read, request.uid)
        if existing is not None:
            return DeploymentStatus.model_validate(existing["status"])
        if len(await self._io(self.store.all)) >= self.settings.capacity:
            raise NoCapacity(f"all {self.settings.capacity} slots are taken")
        status = DeploymentStatus(
            uid=request.uid,
            phase=Phase.PENDING,
            node_name=request.node_name,
            provider_id=f"mem-{uuid.uuid4().hex[:12]}",
            offer_id=request.offer_id or "mem-a100",
            reason="Provisioning",
        )
        record = {"labels": {**request.labels, **request.tags()}, "status": status.model_dump(mode="json")}
        if not await self._io(self.store.create, request.uid, record):
            return DeploymentStatus.model_validate((await self._io(self.store.read, request.uid))["status"])
        return status

    async def get(self, uid: str) -> DeploymentStatus:
        await self._knobs("get")
        record = await self._io(self.store.read, uid)
        if record is None:
            raise NotFound(f"no deployment for pod {uid}")
        return DeploymentStatus.model_validate(record["status"])

    async def _of_node(self, node_name: str) -> list[DeploymentStatus]:
        records = await self._io(self.store.all)
        return [
            DeploymentStatus.model_validate(r["status"])
            for r in records
            if r["labels"].get(LABEL_NODE_NAME) == node_name
        ]

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        await self._knobs("list")
        return await self._of_node(node_name)

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        await self._knobs("delete")
        await self._io(self.store.delete, uid)

    async def close(self) -> None:
        return None

    async def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        seen: dict[str, DeploymentStatus] = {}
        while True:
            for status in await self._of_node(node_name):
                if seen.get(status.uid) != status:
                    seen[status.uid] = status
                    yield status
            await asyncio.sleep(self.settings.poll_seconds)

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        status = await self.get(uid)
        yield f"{uid}: {status.phase.value}\n".encode()
        while options.follow and not status.phase.terminal:
            await asyncio.sleep(self.settings.poll_seconds)
            new = await self.get(uid)
            if new.phase != status.phase:
                yield f"{uid}: {new.phase.value}\n".encode()
            status = new


class MemoryHarness(Harness):
    adapter = "harness_memory:MemoryCloudProvider"
    shared_backend = True
    pythonpath = (str(Path(__file__).parent),)

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = Store(root)

    def settings(self) -> dict[str, Any]:
        return {"state_dir": str(self.root)}

    async def fail_next(self, op: Op, error: ProviderError) -> None:
        data = {
            "code": error.code,
            "message": error.message,
            "retry_after": getattr(error, "retry_after", None),
        }
        await asyncio.to_thread(self.store.put, f"fail-{op}", data)

    async def delay(self, op: Op, seconds: float) -> None:
        await asyncio.to_thread(self.store.put, f"delay-{op}", {"seconds": seconds})

    async def delay_stats(self, op: Op) -> DelayStats:
        started = await asyncio.to_thread(self.store.count, f"started-{op}")
        cancelled = await asyncio.to_thread(self.store.count, f"cancelled-{op}")
        return DelayStats(started=started, cancelled=cancelled)

    async def advance(self, uid: str, phase: Phase) -> None:
        record = await asyncio.to_thread(self.store.read, uid)
        if record is None:
            raise KeyError(uid)
        status = DeploymentStatus.model_validate(record["status"])
        changes: dict[str, Any] = {"phase": phase, "ready": phase is Phase.RUNNING, "reason": phase.value}
        if phase is Phase.RUNNING:
            changes["started_at"] = datetime.now(UTC)
        record["status"] = status.model_copy(update=changes).model_dump(mode="json")
        await asyncio.to_thread(self.store.update, uid, record)


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    yield MemoryHarness(tmp_path / "memorycloud")
