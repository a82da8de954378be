"""The pod controller: watch the pods bound to the virtual node and hand each to ``PodSync``.

Work starts only after the informer's first list and the tracker's first provider poll, so a
restarted service knows every existing pod *and* every existing deployment before it acts
(restart resync without duplicate deployments). Events only enqueue keys; one worker per key
does the work; provider-status changes enqueue the pod they concern.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from vkprovider.errors import ProviderError, Transient
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeError
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.informer import Informer, object_key
from vkprovider.metrics import ORPHANS_DELETED, QUEUE_DEPTH, RECONCILE_SECONDS, RECONCILES
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.pods.objects import ApiObjectSource
from vkprovider.pods.queue import ShutDown, WorkQueue
from vkprovider.pods.sync import PodSync, SyncSettings, is_relevant_change
from vkprovider.pods.tracker import DeploymentTracker
from vkprovider.ratelimit import TokenBucket

log = logging.getLogger(__name__)


class PodController:
    def __init__(
        self,
        kube: KubeClient,
        providers: Mapping[str, Provider],
        placer: Placer,
        *,
        node_name: str,
        host_ip: str,
        workers: int = 16,
        status_poll_seconds: float = 2.0,
        orphan_gc_seconds: float = 60.0,
        lost_grace_seconds: float = 60.0,
        backoff_base_seconds: float = 0.5,
        backoff_max_seconds: float = 60.0,
        queue_rate: float = 100.0,
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self._workers = workers
        self._gc_interval = orphan_gc_seconds
        self.queue = WorkQueue(
            base_delay=backoff_base_seconds,
            max_delay=backoff_max_seconds,
            rate=TokenBucket(queue_rate, max(1, int(queue_rate))),
        )
        self._uid_keys: dict[str, str] = {}
        self.informer = Informer(
            kube, "/api/v1/pods", field_selector=f"spec.nodeName={node_name}", handler=self._on_pod
        )
        self.tracker = DeploymentTracker(
            providers,
            node_name,
            interval=status_poll_seconds,
            on_change=self._on_deployment,
            on_status=placer.observe,
        )
        self.events = EventRecorder(kube, component="vkprovider", host=node_name)
        self.services = Informer(kube, "/api/v1/services", handler=lambda kind, old, new: None)
        self.sync = PodSync(
            kube,
            providers,
            placer,
            self.tracker,
            self.events,
            ApiObjectSource(kube, self.services),
            SyncSettings(
                node_name=node_name,
                host_ip=host_ip,
                lost_grace_seconds=lost_grace_seconds,
                status_poll_seconds=status_poll_seconds,
            ),
        )
        self.providers = providers
        self.synced = asyncio.Event()
        self.orphans_deleted = 0
        self._in_flight: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ event handlers

    def _on_pod(self, kind: str, old: JSON | None, new: JSON) -> None:
        key = object_key(new)
        uid = new["metadata"]["uid"]
        if kind == "DELETED":
            self._uid_keys.pop(uid, None)
            self.queue.add(key)
            return
        self._uid_keys[uid] = key
        if kind == "ADDED" or is_relevant_change(old, new):
            self.queue.add(key)

    def _on_deployment(self, uid: str) -> None:
        key = self._uid_keys.get(uid)
        if key is not None:
            self.queue.add(key)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until cancelled. Supervised by the caller's task group."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.informer.run(), name="pod-informer")
            group.create_task(self.services.run(), name="service-informer")
            await self.informer.synced.wait()
            await self.services.synced.wait()
            await self.tracker.poll_once()
            group.create_task(self.tracker.run(), name="status-tracker")
            self.synced.set()
            log.info(
                "pod controller synced: %d pods, %d deployments",
                len(self.informer.cache),
                len(self.tracker.deployments),
            )
            group.create_task(self._gc_loop(), name="orphan-gc")
            for index in range(self._workers):
                group.create_task(self._worker(), name=f"pod-worker-{index}")

    async def drain(self, timeout: float) -> None:
        """Stop taking new keys; let in-flight syncs finish for up to ``timeout`` seconds."""
        self.queue.shutdown()
        if self._in_flight:
            await asyncio.wait(self._in_flight, timeout=timeout)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            task = asyncio.current_task()
            assert task is not None
            self._in_flight.add(task)
            try:
                await self._process(key)
            finally:
                self._in_flight.discard(task)
                self.queue.done(key)

    async def _process(self, key: str) -> None:
        QUEUE_DEPTH.set(len(self.queue))
        with RECONCILE_SECONDS.time():
            outcome = await self._reconcile(key)
        RECONCILES.labels(outcome).inc()

    async def _reconcile(self, key: str) -> str:
        pod = self.informer.get(key)
        try:
            requeue = await self.sync.sync(key, pod)
        except Transient as exc:
            delay = self.queue.add_rate_limited(key, at_least=exc.retry_after or 0.0)
            log.info("%s: transient error, retrying in %.1fs: %s", key, delay, exc, extra={"pod": key})
            return "transient"
        except (ProviderError, KubeError) as exc:
            delay = self.queue.add_rate_limited(key)
            log.warning("%s: %s, retrying in %.1fs", key, exc, delay, extra={"pod": key})
            return "error"
        except Exception:
            delay = self.queue.add_rate_limited(key)
            log.exception("%s: unexpected error, retrying in %.1fs", key, delay, extra={"pod": key})
            return "bug"
        if requeue is None:
            self.queue.forget(key)
            return "done"
        if requeue.backoff:
            self.queue.add_rate_limited(key)
            return "requeued"
        self.queue.forget(key)
        self.queue.add_after(key, requeue.after)
        return "requeued"

    # ------------------------------------------------------------------ orphans

    async def _gc_loop(self) -> None:
        while True:
            with contextlib.suppress(ProviderError):
                await self.collect_orphans()
            await asyncio.sleep(self._gc_interval)

    async def collect_orphans(self) -> int:
        """Delete deployments labelled for this node whose pod no longer exists (they keep billing)."""
        live = {item["metadata"]["uid"] for item in self.informer.cache.values()}
        known = set(self.sync.known_uids.values())
        deleted = 0
        for uid, tracked in list(self.tracker.deployments.items()):
            if uid in live or uid in known:
                continue
            provider = self.providers.get(tracked.provider)
            if provider is None:
                continue
            log.info("deleting orphaned deployment of pod %s on %s", uid, tracked.provider)
            await provider.delete(uid)
            self.tracker.forget(uid)
            self.sync.placer.release(uid)
            deleted += 1
        self.orphans_deleted += deleted
        ORPHANS_DELETED.inc(deleted)
        return deleted
