"""The quota sync loop: informers on Nodes and ClusterQueues, one JSON patch per queue and change.

It reacts to informer events (debounced) and re-checks at least every ``interval_seconds``; it
never lists per reading. A write replaces only the synced fields (the configured flavors'
``nominalQuota``, and ``stopPolicy`` while the sync holds the queue: ``plan.py``), guarded by
the ClusterQueue's resourceVersion (a concurrent edit fails the patch and the next round starts
from the fresh object). Each write gets an Event naming the nodes that changed it; a value
edited by hand is overwritten with an Event saying so; a hold and its release are Events too.
State belongs to one run: a new leadership term builds a new ``QuotaSync`` (whether a hold is
the sync's own is read from the queue's annotation, not remembered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from decimal import Decimal

from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeError, KubeInvalid
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.informer import Informer
from vkprovider.kube.resources import api_path
from vkprovider.quota import metrics, report
from vkprovider.quota.config import QuotaConfig
from vkprovider.quota.plan import (
    FlavorQuota,
    QueuePlan,
    QuotaTargetError,
    format_quantity,
    held_by_sync,
    locate,
    patch_ops,
)
from vkprovider.quota.reading import FlavorReading, plan_queue, read_flavors
from vkprovider.retry import Backoff

log = logging.getLogger(__name__)

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
JSON_PATCH = "application/json-patch+json"
_DEBOUNCE_SECONDS = 0.5


def cluster_queue_path(name: str) -> str:
    return api_path("clusterqueues", name, group="kueue.x-k8s.io", version="v1beta2")


def locate_all(config: QuotaConfig, name: str, cq: JSON | None) -> dict[str, FlavorQuota]:
    """The synced fields of queue ``name`` in each of its flavors; ``QuotaTargetError`` naming
    the config field when the queue, a flavor or a resource is missing."""
    where = {}
    for target in config.targets():
        for i, queue in enumerate(target.flavor.queues):
            if queue.name == name:
                where[target.flavor.name] = locate(
                    cq,
                    name,
                    target.flavor.name,
                    target.flavor.resources,
                    queue_field=target.queue_field(i),
                    flavor_field=target.name_field,
                    resources_field=target.resources_field,
                )
    return where


class QuotaSync:
    def __init__(self, kube: KubeClient, config: QuotaConfig, recorder: EventRecorder) -> None:
        self._kube = kube
        self._config = config
        self._recorder = recorder
        self._dirty = asyncio.Event()
        self._nodes = Informer(kube, "/api/v1/nodes", handler=self._changed)
        # every queue, not only ours: the usage of a flavor counts whoever holds it
        self._queues = Informer(kube, f"{KUEUE_API}/clusterqueues", handler=self._changed)
        self._written: dict[tuple[str, str, str], Decimal] = {}  #: (queue, flavor, resource) last written
        self._counted: dict[str, report.Counted] = {}  #: queue -> node states when last written
        self._warned: set[tuple[str, str]] = set()  #: (flavor, unmanaged queue) warned this term
        self.writes = 0
        self.rounds = 0  #: completed sync rounds (a dry run is observable through these two)
        self.last_plans: dict[str, QueuePlan] = {}
        self.last_readings: list[FlavorReading] = []

    def _changed(self, _kind: str, _old: JSON | None, _new: JSON) -> None:
        self._dirty.set()

    async def run(self) -> None:
        """Sync until cancelled. Raises ``QuotaTargetError`` at start if a target is missing."""
        tasks = [asyncio.create_task(i.run()) for i in (self._nodes, self._queues)]
        try:
            try:
                async with asyncio.timeout(60):
                    await asyncio.gather(self._nodes.synced.wait(), self._queues.synced.wait())
            except TimeoutError:
                raise QuotaTargetError(
                    "could not list Nodes and ClusterQueues within 60s: is the apiserver reachable "
                    "and Kueue's API (kueue.x-k8s.io/v1beta2) installed?"
                ) from None
            for name in self._config.queue_names():  # fail fast, no writes
                locate_all(self._config, name, self._queue(name))
            backoff = Backoff(base=1.0, cap=self._config.interval_seconds * 6, jitter=0.5)
            while True:
                try:
                    await self.sync_once()
                    self.rounds += 1
                    backoff.reset()
                except Exception:  # a bug or an odd object must not end the sync for good
                    delay = backoff.next()
                    log.exception("quota sync round failed; retrying in %.1fs", delay)
                    metrics.WRITES.labels("crashed").inc()
                    await asyncio.sleep(delay)
                    continue
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # lands as the event fires, and the loop would outlive its term
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._config.interval_seconds):
                        await self._dirty.wait()
                await asyncio.sleep(_DEBOUNCE_SECONDS)  # a burst of node events makes one write
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _queue(self, name: str) -> JSON | None:
        return self._queues.get(f"/{name}")

    async def sync_once(self) -> dict[str, QueuePlan]:
        """One reading and, per queue whose fields differ, one guarded write. Returns the plans."""
        self._dirty.clear()
        cfg = self._config
        queues = {cq["metadata"]["name"]: cq for cq in self._queues.cache.values()}
        readings = read_flavors(cfg.targets(), self._nodes.cache.values(), queues, cfg.maintenance_taints)
        self.last_readings = readings
        self._observe(readings)
        await self._warn_unmanaged(readings, queues)
        plans: dict[str, QueuePlan] = {}
        for name in cfg.queue_names():
            cq = queues.get(name)
            try:
                where = locate_all(cfg, name, cq)
            except QuotaTargetError as exc:  # while running: the queue was deleted or edited
                log.error("quota sync: %s; not writing it", exc)
                metrics.WRITES.labels("target_missing").inc()
                continue
            assert cq is not None
            plan = plan_queue(name, cq, readings, where, hold=cfg.hold)
            plans[name] = plan
            await self._apply(cq, plan, where, readings)
        self.last_plans = plans
        return plans

    async def _apply(
        self, cq: JSON, plan: QueuePlan, where: dict[str, FlavorQuota], readings: list[FlavorReading]
    ) -> None:
        name = plan.queue
        for (flavor, resource), value in where_current(where).items():
            metrics.NOMINAL.labels(name, flavor, resource).set(float(value))
        if not plan.writes:
            self._remember(plan, readings, cq)
            return
        if self._config.dry_run:
            log.info(
                "quota sync (dry run): ClusterQueue %s: would set %s%s",
                name,
                report.describe(plan.changes) or "no quota",
                f", stopPolicy {plan.hold}" if plan.hold else "",
            )
            return
        pointers = {(f, r): p for f, located in where.items() for r, p in located.pointers.items()}
        try:
            await self._kube.request(
                "PATCH",
                cluster_queue_path(name),
                body=patch_ops(cq, pointers, plan.changes, plan.hold),
                content_type=JSON_PATCH,
            )
        except (KubeConflict, KubeInvalid) as exc:  # resourceVersion moved on: retry from fresh state
            metrics.WRITES.labels("conflict").inc()
            log.info("quota sync: ClusterQueue %s changed meanwhile (%s); retrying", name, exc.status)
            self._dirty.set()
            return
        except KubeError as exc:
            metrics.WRITES.labels("error").inc()
            log.warning("quota sync: writing ClusterQueue %s failed: %s", name, exc)
            self._dirty.set()
            return
        metrics.WRITES.labels("written").inc()
        self.writes += 1
        await self._report(cq, plan, where, readings)
        self._remember(plan, readings, cq)
        for (flavor, resource), value in plan.target.items():
            metrics.NOMINAL.labels(name, flavor, resource).set(float(value))

    def _remember(self, plan: QueuePlan, readings: list[FlavorReading], cq: JSON) -> None:
        for (flavor, resource), value in plan.target.items():
            self._written[(plan.queue, flavor, resource)] = value
        self._counted[plan.queue] = report.counted(readings)
        held = plan.hold == "hold" or (plan.hold is None and held_by_sync(cq))
        metrics.ON_HOLD.labels(plan.queue).set(1 if held else 0)

    async def _report(
        self, cq: JSON, plan: QueuePlan, where: dict[str, FlavorQuota], readings: list[FlavorReading]
    ) -> None:
        name = plan.queue
        current = where_current(where)
        edited = {
            key: (self._written[(name, *key)], current[key])
            for key in plan.changes
            if (name, *key) in self._written and current.get(key) != self._written[(name, *key)]
        }
        if edited:
            text = ", ".join(
                f"{r} of flavor {f} was {format_quantity(r, now)} (last synced {format_quantity(r, ours)})"
                for (f, r), (ours, now) in sorted(edited.items())
            )
            await self._event(
                cq, "Warning", "QuotaOverwritten", f"edited outside the sync: {text}; set back to the offer"
            )
        if plan.changes:
            message = report.synced_message(plan, readings, self._counted.get(name, {}))
            await self._event(cq, "Normal", "QuotaSynced", message)
            log.info("quota sync: ClusterQueue %s: %s", name, message)
        # A hold is reported when it begins, and again whenever the quota moves while it lasts
        # (a second node lost): the Event always states the shortfall now, not the first one.
        still_held = plan.hold is None and plan.changes and plan.shortfalls and held_by_sync(cq)
        if plan.hold == "hold" or still_held:
            if plan.hold == "hold":
                metrics.HOLDS.labels(name).inc()
            message = report.hold_message(plan)
            await self._event(cq, "Warning", "QuotaHold", message)
            log.warning("quota sync: ClusterQueue %s: %s", name, message)
        elif plan.hold == "release":
            message = "stopPolicy None: admitted usage fits what the healthy nodes offer again"
            await self._event(cq, "Normal", "QuotaReleased", message)
            log.info("quota sync: ClusterQueue %s: %s", name, message)
        elif plan.hold == "unmark":
            policy = (cq.get("spec") or {}).get("stopPolicy") or "None"
            message = f"stopPolicy was set to {policy} by someone else: the sync no longer owns the hold"
            await self._event(cq, "Normal", "QuotaHoldTakenOver", message)

    def _observe(self, readings: list[FlavorReading]) -> None:
        for reading in readings:
            metrics.HEALTHY_NODES.labels(reading.name).set(sum(1 for n in reading.nodes if n.healthy))
            for resource, value in reading.offer.items():
                metrics.OFFERED.labels(reading.name, resource).set(float(value))
                metrics.USED.labels(reading.name, resource).set(float(reading.total_used(resource)))

    async def _warn_unmanaged(self, readings: list[FlavorReading], queues: dict[str, JSON]) -> None:
        for reading in readings:
            for name in reading.unmanaged:
                if (reading.name, name) in self._warned:
                    continue
                self._warned.add((reading.name, name))
                message = (
                    f"has nominalQuota in flavor {reading.name}, whose offer the quota sync splits "
                    f"between {', '.join(q.name for q in reading.target.flavor.queues)} only: its quota "
                    f"comes on top (list it under {reading.target.field}.queues, with a share)"
                )
                log.warning("quota sync: ClusterQueue %s %s", name, message)
                await self._event(queues[name], "Warning", "QuotaNotManaged", message)

    async def _event(self, cq: JSON, kind: str, reason: str, message: str) -> None:
        meta = cq["metadata"]
        involved = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        }
        await self._recorder.record(involved, "Warning" if kind == "Warning" else "Normal", reason, message)


def where_current(where: dict[str, FlavorQuota]) -> dict[tuple[str, str], Decimal]:
    return {(f, r): v for f, located in where.items() for r, v in located.current.items()}
