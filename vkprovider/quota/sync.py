"""The quota sync loop: informers on Nodes and the ClusterQueue, one JSON patch per change.

It reacts to informer events (debounced) and re-checks at least every ``interval_seconds``; it
never lists per reading. A write replaces only the synced ``nominalQuota`` fields, guarded by
the ClusterQueue's resourceVersion (a concurrent edit fails the patch and the next round
starts from the fresh object). Each write gets an Event naming the nodes that changed it; a
value edited by hand is overwritten with an Event saying so; a decrease below what admitted
workloads hold is refused with a Warning Event. State belongs to one run: a new leadership
term builds a new ``QuotaSync``.
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
from vkprovider.quota import metrics
from vkprovider.quota.capacity import NodeState, in_pool, node_state, offered
from vkprovider.quota.config import QuotaConfig
from vkprovider.quota.plan import Plan, QuotaTargetError, format_quantity, in_use, locate, patch_ops, plan
from vkprovider.retry import Backoff
from vkprovider.translate.quantity import parse_quantity

log = logging.getLogger(__name__)

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"


def cluster_queue_path(name: str) -> str:
    return api_path("clusterqueues", name, group="kueue.x-k8s.io", version="v1beta2")


JSON_PATCH = "application/json-patch+json"
_DEBOUNCE_SECONDS = 0.5


class QuotaSync:
    def __init__(self, kube: KubeClient, config: QuotaConfig, recorder: EventRecorder) -> None:
        self._kube = kube
        self._config = config
        self._recorder = recorder
        self._reserve = {name: parse_quantity(v, name) for name, v in config.reserve.items()}
        self._dirty = asyncio.Event()
        self._nodes = Informer(kube, "/api/v1/nodes", handler=self._changed)
        self._queues = Informer(
            kube,
            f"{KUEUE_API}/clusterqueues",
            field_selector=f"metadata.name={config.cluster_queue}",
            handler=self._changed,
        )
        self._written: dict[str, Decimal] = {}  #: what this run last wrote (to spot hand edits)
        self._counted: dict[str, str] = {}  #: node -> state when the quota was last written
        self.writes = 0
        self.rounds = 0  #: completed sync rounds (a dry run is observable through these two)
        self.last_plan: Plan | None = None

    def _changed(self, _kind: str, _old: JSON | None, _new: JSON) -> None:
        self._dirty.set()

    async def run(self) -> None:
        """Sync until cancelled. Raises ``QuotaTargetError`` at start if the target is missing."""
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
            cfg = self._config
            locate(self._queue(), cfg.cluster_queue, cfg.flavor, cfg.resources)  # fail fast, no writes
            backoff = Backoff(base=1.0, cap=cfg.interval_seconds * 6, jitter=0.5)
            while True:
                try:
                    self.last_plan = await self.sync_once()
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
                    async with asyncio.timeout(cfg.interval_seconds):
                        await self._dirty.wait()
                await asyncio.sleep(_DEBOUNCE_SECONDS)  # a burst of node events makes one write
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _queue(self) -> JSON | None:
        return self._queues.get(f"/{self._config.cluster_queue}")

    def node_states(self) -> list[NodeState]:
        cfg = self._config
        return [
            node_state(node, cfg.resources, cfg.maintenance_taints)
            for node in self._nodes.cache.values()
            if in_pool(node, cfg.node_selector)
        ]

    async def sync_once(self) -> Plan | None:
        """One reading and, if the quota differs, one guarded write. Returns the plan (or None)."""
        self._dirty.clear()
        cfg = self._config
        cq = self._queue()
        try:
            where = locate(cq, cfg.cluster_queue, cfg.flavor, cfg.resources)
        except QuotaTargetError as exc:  # while running: the queue was deleted or edited
            log.error("quota sync: %s; not writing", exc)
            metrics.WRITES.labels("target_missing").inc()
            return None
        assert cq is not None
        nodes = self.node_states()
        want = offered(nodes, cfg.resources, self._reserve)
        result = plan(where.current, want, in_use(cq, cfg.flavor))
        self._observe(nodes, want, where.current)
        await self._report_held(cq, result)
        if not result.changes:
            self._written = dict(result.target)
            self._counted = {n.name: n.state for n in nodes}
            return result
        if cfg.dry_run:
            log.info("quota sync (dry run): would set %s", _describe(result.changes))
            return result
        try:
            await self._kube.request(
                "PATCH",
                cluster_queue_path(cfg.cluster_queue),
                body=patch_ops(cq["metadata"]["resourceVersion"], where.pointers, result.changes),
                content_type=JSON_PATCH,
            )
        except (KubeConflict, KubeInvalid) as exc:  # resourceVersion moved on: retry from fresh state
            metrics.WRITES.labels("conflict").inc()
            log.info("quota sync: ClusterQueue changed meanwhile (%s); retrying", exc.status)
            self._dirty.set()
            return None
        except KubeError as exc:
            metrics.WRITES.labels("error").inc()
            log.warning("quota sync: writing ClusterQueue %s failed: %s", cfg.cluster_queue, exc)
            self._dirty.set()
            return None
        metrics.WRITES.labels("written").inc()
        self.writes += 1
        await self._report_write(cq, result, where.current, nodes)
        self._written = dict(result.target)
        self._counted = {n.name: n.state for n in nodes}
        for name, value in result.target.items():
            metrics.NOMINAL.labels(cfg.cluster_queue, name).set(float(value))
        return result

    def _observe(self, nodes: list[NodeState], want: dict[str, Decimal], current: dict[str, Decimal]) -> None:
        name = self._config.cluster_queue
        metrics.HEALTHY_NODES.labels(name).set(sum(1 for n in nodes if n.healthy))
        for resource, value in want.items():
            metrics.OFFERED.labels(name, resource).set(float(value))
            metrics.NOMINAL.labels(name, resource).set(float(current.get(resource, 0)))

    async def _report_write(
        self, cq: JSON, result: Plan, current: dict[str, Decimal], nodes: list[NodeState]
    ) -> None:
        edited = {
            r: (self._written[r], current[r])
            for r in result.changes
            if r in self._written and current.get(r) != self._written[r]
        }
        if edited:
            text = ", ".join(
                f"{r} was {format_quantity(r, now)} (last synced {format_quantity(r, ours)})"
                for r, (ours, now) in sorted(edited.items())
            )
            await self._event(
                cq,
                "Warning",
                "QuotaOverwritten",
                f"edited outside the sync: {text}; set back to what healthy nodes offer",
            )
        message = f"nominalQuota of flavor {self._config.flavor}: {_describe(result.changes)}"
        moved = _node_changes(self._counted, nodes)
        if moved:
            message += f"; nodes: {moved}"
        await self._event(cq, "Normal", "QuotaSynced", message)
        log.info("quota sync: %s", message)

    async def _report_held(self, cq: JSON, result: Plan) -> None:
        for resource, (want, kept) in sorted(result.held.items()):
            if self._written.get(resource) == kept and resource not in result.changes:
                continue  # already said for this value
            metrics.HELD.labels(resource).inc()
            await self._event(
                cq,
                "Warning",
                "QuotaHeld",
                f"not lowering {resource} to {format_quantity(resource, want)} (what healthy nodes offer): "
                f"admitted workloads use {format_quantity(resource, kept)}",
            )

    async def _event(self, cq: JSON, kind: str, reason: str, message: str) -> None:
        meta = cq["metadata"]
        involved = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        }
        await self._recorder.record(involved, "Warning" if kind == "Warning" else "Normal", reason, message)


def _describe(changes: dict[str, tuple[Decimal, Decimal]]) -> str:
    return ", ".join(
        f"{r} {format_quantity(r, old)}->{format_quantity(r, new)}"
        for r, (old, new) in sorted(changes.items())
    )


def _node_changes(before: dict[str, str], nodes: list[NodeState]) -> str:
    now = {n.name: n.state for n in nodes}
    parts = []
    for name in sorted(set(before) | set(now)):
        was, is_ = before.get(name), now.get(name)
        if was == is_:
            continue
        if is_ is None:
            parts.append(f"{name} left (deleted)")
        elif is_ == "healthy":
            parts.append(f"{name} joined" + (f" (was {was})" if was else ""))
        elif was == "healthy" or was is None:
            parts.append(f"{name} left ({is_})" if was else f"{name} not counted ({is_})")
    return ", ".join(parts)
