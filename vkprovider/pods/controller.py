"""The pod controller: watch the pods bound to the virtual node and hand each to ``PodSync``.

Every ``run()`` is a new ``Term`` (one leadership term, or one supervised restart) with its own
caches, tracker, queue and sync state, so nothing seen in an earlier term — when another replica
may have acted — is trusted. Work starts only after the term's informers listed and its tracker
polled every provider, so the controller knows every existing pod *and* every existing
deployment before it acts (restart resync without duplicate deployments). Events only enqueue
keys; one worker per key does the work; provider-status changes enqueue the pod they concern.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any, Protocol

from vkprovider.errors import ProviderError, Transient
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeError
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.informer import Informer
from vkprovider.metrics import ORPHANS_DELETED, RECONCILE_SECONDS, RECONCILES
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.pods.orphans import OrphanPass, collect_orphans
from vkprovider.pods.queue import ShutDown, WorkQueue
from vkprovider.pods.sync import PodSync
from vkprovider.pods.term import Term, TermSettings
from vkprovider.pods.tracker import DeploymentTracker
from vkprovider.tasks import supervise
from vkprovider.traffic.config import TrafficConfig

log = logging.getLogger(__name__)


class Election(Protocol):
    """What readiness needs to know of a leader elector."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader(self) -> str | None: ...


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
        watch_resync_seconds: float = 300.0,
        orphan_gc_seconds: float = 60.0,
        lost_grace_seconds: float = 60.0,
        backoff_base_seconds: float = 0.5,
        backoff_max_seconds: float = 60.0,
        queue_rate: float = 100.0,
        status_before_delete: bool = False,
        traffic: TrafficConfig | None = None,
        zone: str | None = None,
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.providers = providers
        self.placer = placer
        self._workers = workers
        self._gc_interval = orphan_gc_seconds
        self._settings = TermSettings(
            node_name=node_name,
            host_ip=host_ip,
            status_poll_seconds=status_poll_seconds,
            watch_resync_seconds=watch_resync_seconds,
            lost_grace_seconds=lost_grace_seconds,
            backoff_base_seconds=backoff_base_seconds,
            backoff_max_seconds=backoff_max_seconds,
            queue_rate=queue_rate,
            status_before_delete=status_before_delete,
            traffic=traffic or TrafficConfig(),
            zone=zone,
        )
        # Queued and written by background senders: a reconcile never waits for an Event.
        self.events = EventRecorder(kube, component="vkprovider", host=node_name, background=True)
        self.terms = 0  #: runs started (leadership terms and supervised restarts)
        self.term = self._new_term()  # idle until run(); replaced by every run()
        self.running = False  #: a term is running (this replica acts)
        #: set while the running term is synced; cleared as soon as that term ends
        self.synced = asyncio.Event()
        self.elector: Election | None = None  #: set by the service when leader election is on
        self.orphans_deleted = 0
        self.orphan_failures = 0
        self.orphan_passes = 0
        self._in_flight: set[asyncio.Task[None]] = set()

    def _new_term(self) -> Term:
        return Term(self.terms, self.kube, self.providers, self.placer, self.events, self._settings)

    # ------------------------------------------------------------------ the current term's parts

    @property
    def informer(self) -> Informer:
        return self.term.informer

    @property
    def services(self) -> Informer:
        return self.term.services

    @property
    def tracker(self) -> DeploymentTracker:
        return self.term.tracker

    @property
    def queue(self) -> WorkQueue:
        return self.term.queue

    @property
    def sync(self) -> PodSync:
        return self.term.sync

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready?, detail) for /readyz: a leader is ready once *this* term is synced; a standby
        replica is ready as a standby (it says so, and who leads); anything else is not ready."""
        if self.running or self.elector is None or self.elector.is_leader:
            synced = self.running and self.synced.is_set()
            role = "active" if self.elector is None else "leader"
            return synced, {"ready": synced, "role": role, "term": self.terms, "synced": synced}
        return True, {"ready": True, "role": "standby", "leader": self.elector.leader}

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run one term until cancelled. Supervised by the caller's task group."""
        self.terms += 1
        term = self.term = self._new_term()
        self.synced.clear()
        self.running = True
        unsubscribe = self.placer.health.subscribe(term.tracker.recheck)  # probes wake its lists
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(term.informer.run(), name="pod-informer")
                group.create_task(term.services.run(), name="service-informer")
                await term.informer.synced.wait()
                await term.services.synced.wait()
                # Pods of an earlier term: may hold a deployment on a provider not listed yet.
                term.sync.resume.inherited = frozenset(term.uid_keys)
                await term.tracker.poll_once()
                group.create_task(supervise("status-tracker", term.tracker.run), name="status-tracker")
                term.synced = True
                self.synced.set()
                log.info(
                    "pod controller synced (term %d): %d pods, %d deployments",
                    term.number,
                    len(term.informer.cache),
                    len(term.tracker.deployments),
                )
                group.create_task(supervise("orphan-gc", partial(self._gc_loop, term)), name="orphan-gc")
                if term.publisher is not None:
                    group.create_task(supervise("endpoint-publisher", term.publisher.run), name="endpoints")
                for index in range(self._workers):
                    group.create_task(self._worker(term), name=f"pod-worker-{index}")
        finally:
            unsubscribe()
            self.events.stop()
            self.synced.clear()
            self.running = False
            term.synced = False
            term.queue.shutdown()  # cancels its backoff timers: they belong to this term

    async def drain(self, timeout: float) -> None:
        """Stop taking new keys; let in-flight syncs finish for up to ``timeout`` seconds."""
        self.term.queue.shutdown()
        started = asyncio.get_running_loop().time()
        if self._in_flight:
            await asyncio.wait(self._in_flight, timeout=timeout)
        left = timeout - (asyncio.get_running_loop().time() - started)
        await self.events.close(timeout=max(0.5, left))  # the Events those syncs recorded

    async def _worker(self, term: Term) -> None:
        while True:
            try:
                key = await term.queue.get()
            except ShutDown:
                return
            task = asyncio.current_task()
            assert task is not None
            self._in_flight.add(task)
            try:
                await self._process(term, key)
            finally:
                self._in_flight.discard(task)
                term.queue.done(key)

    async def _process(self, term: Term, key: str) -> None:
        with RECONCILE_SECONDS.time():
            outcome = await self._reconcile(term, key)
        RECONCILES.labels(outcome).inc()

    async def _reconcile(self, term: Term, key: str) -> str:
        queue = term.queue
        pod = term.informer.get(key)
        try:
            requeue = await term.sync.sync(key, pod)
        except Transient as exc:
            delay = queue.add_rate_limited(key, at_least=exc.retry_after or 0.0)
            log.info("%s: transient error, retrying in %.1fs: %s", key, delay, exc, extra={"pod": key})
            return "transient"
        except (ProviderError, KubeError) as exc:
            delay = queue.add_rate_limited(key)
            log.warning("%s: %s, retrying in %.1fs", key, exc, delay, extra={"pod": key})
            return "error"
        except Exception:
            delay = queue.add_rate_limited(key)
            log.exception("%s: unexpected error, retrying in %.1fs", key, delay, extra={"pod": key})
            return "bug"
        if requeue is None:
            queue.forget(key)
            return "done"
        if requeue.backoff:
            queue.add_rate_limited(key)
            return "requeued"
        queue.forget(key)
        queue.add_after(key, requeue.after)
        return "requeued"

    # ------------------------------------------------------------------ orphans

    async def _gc_loop(self, term: Term) -> None:
        while True:
            await self._collect(term)
            await asyncio.sleep(self._gc_interval)

    async def collect_orphans(self) -> OrphanPass:
        """One orphan pass on the running term (nothing when no term is synced)."""
        return await self._collect(self.term)

    async def _collect(self, term: Term) -> OrphanPass:
        result = await collect_orphans(term, self.providers, self.placer)
        if term.synced:
            self.orphan_passes += 1
        self.orphans_deleted += result.deleted
        self.orphan_failures += result.failed
        ORPHANS_DELETED.inc(result.deleted)
        if result.failed:
            log.warning("orphan pass: %d deleted, %d deletes failed", result.deleted, result.failed)
        return result
