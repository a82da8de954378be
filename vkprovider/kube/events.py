"""Kubernetes Events for pods, aggregated like the kubelet's recorder.

The same (object, type, reason, message) within a short window bumps ``count`` on the existing
Event instead of creating a new one, so a pod retried with backoff does not flood etcd.
Recording never raises: an Event is diagnostics, and losing one must not fail a reconcile.
Callers are responsible for never putting secret values into messages.

With ``background=True`` (the pod controller) ``record`` only queues the Event and returns,
like client-go's broadcaster: a reconcile does not wait for a write whose answer it never
needs, so a pod's path to Running costs one round trip less. Events of one object are written
in order by one of ``senders`` tasks (sharded by object), so aggregation stays exact; a full
queue drops the Event with a log line rather than grow without bound or block a reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import zlib
from collections import OrderedDict
from typing import Any, Literal

from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeError
from vkprovider.kube.resources import create_event, patch_event

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
_MAX_MESSAGE = 1024
_MAX_REMEMBERED = 4096
_Item = tuple[dict[str, Any], EventType, str, str]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class EventRecorder:
    def __init__(
        self,
        kube: KubeClient,
        *,
        component: str,
        host: str,
        window_seconds: float = 600.0,
        background: bool = False,
        senders: int = 8,
        max_queued: int = 10_000,
    ) -> None:
        self._kube = kube
        self._component = component
        self._host = host
        self._window = window_seconds
        self._recent: OrderedDict[tuple[str, str, str, str], tuple[str, int, float]] = OrderedDict()
        self.recorded = 0
        self.dropped = 0  #: Events not written because the background queue was full
        self._background = background
        self._queues: list[asyncio.Queue[_Item]] = [
            asyncio.Queue() for _ in range(senders if background else 0)
        ]
        self._max_queued = max_queued
        self._tasks: list[asyncio.Task[None]] = []

    async def pod(self, pod: JSON, kind: EventType, reason: str, message: str) -> None:
        meta = pod["metadata"]
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        await self.record(involved, kind, reason, message)

    async def record(self, involved: dict[str, Any], kind: EventType, reason: str, message: str) -> None:
        if not self._background:
            await self._write(involved, kind, reason, message)
            return
        if sum(q.qsize() for q in self._queues) >= self._max_queued:
            self.dropped += 1
            log.warning("event queue full: dropping %s on %s", reason, involved.get("name"))
            return
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._send(q), name="event-sender") for q in self._queues]
        shard = zlib.crc32(str(involved.get("uid") or involved.get("name")).encode()) % len(self._queues)
        self._queues[shard].put_nowait((involved, kind, reason, message))

    async def flush(self) -> None:
        """Wait until every queued Event is written (or failed); for shutdown and tests."""
        for queue in self._queues:
            await queue.join()

    async def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds), then stop the senders."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.flush()
        self.stop()

    def stop(self) -> None:
        """Stop the senders now; what is still queued is written if recording starts again."""
        for task in self._tasks:
            task.cancel()
        self._tasks = []

    async def _send(self, queue: asyncio.Queue[_Item]) -> None:
        while True:
            item = await queue.get()
            try:
                await self._write(*item)
            except Exception:  # a bug here must not stop the sender: Events are diagnostics
                log.exception("writing an event failed")
            finally:
                queue.task_done()

    async def _write(self, involved: dict[str, Any], kind: EventType, reason: str, message: str) -> None:
        message = message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 3] + "..."
        namespace = involved.get("namespace") or "default"
        key = (str(involved.get("uid")), kind, reason, message)
        now = time.monotonic()
        seen = self._recent.get(key)
        try:
            if seen is not None and now - seen[2] < self._window:
                name, count, _ = seen
                await patch_event(self._kube, namespace, name, {"count": count + 1, "lastTimestamp": _now()})
                self._remember(key, (name, count + 1, now))
            else:
                name = f"{involved['name']}.{uuid.uuid4().hex[:16]}"
                stamp = _now()
                await create_event(
                    self._kube,
                    namespace,
                    {
                        "apiVersion": "v1",
                        "kind": "Event",
                        "metadata": {"name": name, "namespace": namespace},
                        "involvedObject": involved,
                        "type": kind,
                        "reason": reason,
                        "message": message,
                        "source": {"component": self._component, "host": self._host},
                        "reportingComponent": self._component,
                        "reportingInstance": self._host,
                        "firstTimestamp": stamp,
                        "lastTimestamp": stamp,
                        "count": 1,
                    },
                )
                self._remember(key, (name, 1, now))
            self.recorded += 1
        except KubeError as exc:
            log.warning(
                "could not record event %s on %s/%s: %s", reason, namespace, involved.get("name"), exc
            )

    def _remember(self, key: tuple[str, str, str, str], value: tuple[str, int, float]) -> None:
        self._recent[key] = value
        self._recent.move_to_end(key)
        while len(self._recent) > _MAX_REMEMBERED:
            self._recent.popitem(last=False)
