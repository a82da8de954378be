"""The gate: read the signal, decide with hysteresis, write the one taint, tell people.

Everything that belongs to a leadership term (informer caches, hysteresis timers) is built
fresh in ``run()``, so a new leader starts from the node's real state. Stopping or crashing
does not touch the taint: the next run adopts it, and if none comes the node agent removes it
once the gate's heartbeat is stale (``claim.py``). A taint of ours that disappears (node
recreated, someone removed it without pausing the gate) is re-asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from vkprovider.errors import ConfigError
from vkprovider.gate import metrics
from vkprovider.gate.claim import Claim, Standing, default_identity
from vkprovider.gate.config import GateConfig
from vkprovider.gate.decision import Action, Decider, Decision, Observation
from vkprovider.gate.kube_signal import KubeSignal
from vkprovider.gate.pending import blocking_pods, pod_key, preempting
from vkprovider.gate.pending_hold import HoldCeiling
from vkprovider.gate.prom_signal import PrometheusSignal
from vkprovider.gate.returns import ReturnHome
from vkprovider.gate.selector import parse_selector
from vkprovider.gate.signal import Reading, Signal, SignalUnavailable
from vkprovider.gate.taint import TaintWriter, has_taint
from vkprovider.gate.view import ClusterView
from vkprovider.kube import resources
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeError
from vkprovider.kube.events import EventRecorder, EventType

log = logging.getLogger(__name__)


def build_signal(config: GateConfig, view: ClusterView) -> Signal:
    if config.signal.kind == "prometheus":
        return PrometheusSignal(config.signal.prometheus)
    return KubeSignal(view, config.signal.kube)


class Gate:
    def __init__(
        self,
        kube: KubeClient,
        config: GateConfig,
        node_name: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        signal_factory: Callable[[GateConfig, ClusterView], Signal] = build_signal,
        identity: str | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.config = config
        self.node_name = node_name
        self._clock = clock
        self._signal_factory = signal_factory
        self.writer = TaintWriter(kube, node_name, config.taint)
        self.events = EventRecorder(kube, component="vkprovider-gate", host=node_name)
        self.decider = Decider(config)
        self.claim = Claim(
            kube,
            node_name,
            identity=config.identity or identity or default_identity("serve"),
            taint_key=config.taint.key,
            signal_timeout_seconds=config.signal_timeout_seconds,
            wall=wall,
        )
        self.view: ClusterView | None = None
        self.returns: ReturnHome | None = None
        self.last_reading: Reading | None = None
        self.last_decision: Decision | None = None
        self.last_error = ""
        self.blocked: list[str] = []
        self.holds = HoldCeiling(config.pending_hold_max_seconds)
        self.flips: list[dict[str, Any]] = []  #: recent flips, newest last (for /state)
        self.running = False
        self._waiting_for_node = False

    async def preflight(self) -> None:
        """Start-up checks that need the cluster: refuse (``ConfigError`` naming the field) a
        node selector that matches no node, or a PromQL query Prometheus rejects."""
        kube_cfg = self.config.signal.kube
        try:
            matches = parse_selector(kube_cfg.node_selector)
        except ValueError as exc:
            raise ConfigError(f"gate.signal.kube.node_selector: {exc}") from None
        body = await self.kube.request("GET", "/api/v1/nodes")
        if self.config.signal.kind == "kube" and not any(
            matches(n["metadata"].get("labels") or {}) for n in body.get("items") or []
        ):
            raise ConfigError(f"gate.signal.kube.node_selector: {kube_cfg.node_selector!r} matches no node")
        if self.config.signal.kind == "prometheus":
            signal = PrometheusSignal(self.config.signal.prometheus)
            try:
                await signal.start()
            finally:
                await signal.close()

    async def run(self) -> None:
        """One leadership term: fresh caches and timers, adopt the node's taint, then loop."""
        self.view = view = ClusterView(self.kube, kueue=self.config.return_home.enabled)
        self.decider = Decider(self.config)
        self.returns = ReturnHome(self.kube, self.config, self.node_name, self.events)
        signal = self._signal_factory(self.config, view)
        watching = asyncio.create_task(view.run(), name="gate-informers")
        self.running = True
        metrics.STATE.start(self.node_name)
        try:
            # No wait for the caches: until they sync the signal is unavailable, and a taint
            # held that long is removed (fail open) instead of staying for a stuck term.
            await signal.start()
            log.info(
                "gate running on node %s (signal %s%s)",
                self.node_name,
                signal.kind,
                ", dry-run" if self.config.dry_run else "",
            )
            while True:
                if watching.done():
                    watching.result()  # an informer crashed: surface it to the supervisor
                await self.tick(signal)
                view.changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.config.interval_seconds):
                        await view.changed.wait()
                await asyncio.sleep(min(1.0, self.config.interval_seconds))  # coalesce bursts
        finally:
            self.running = False
            metrics.STATE.stop(self.node_name)
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watching
            with contextlib.suppress(Exception):
                await signal.close()

    async def _read(self, signal: Signal) -> Reading | None:
        try:
            if self.view is not None and not self.view.synced:
                # the Pending and preemption rules need every pod: no decision on a partial view
                raise SignalUnavailable(
                    "not_synced", "the gate's node/pod caches have not synced (can it list and watch pods?)"
                )
            reading = await signal.read()
        except SignalUnavailable as exc:
            metrics.SIGNAL_ERRORS.labels(self.node_name, exc.kind).inc()
            metrics.STATE.set("signal_up", 0, node=self.node_name)
            self.last_error = f"{exc.kind}: {exc}"
            return None
        metrics.STATE.set("signal_up", 1, node=self.node_name)
        metrics.STATE.set("free_gpus", reading.free_gpus, node=self.node_name)
        self.last_error = ""
        self.last_reading = reading
        return reading

    async def tick(self, signal: Signal) -> Decision:
        """One reading, one decision, at most one write."""
        assert self.view is not None
        now = self._clock()
        node = await self._node()
        if not self.config.dry_run:  # the claim: paused, or another gate's, means no writes
            verdict = await self.claim.check(node, self.events)
            if verdict.standing is not Standing.OWNER:
                self.decider.tainted = None  # re-adopt the node's state once it is ours again
                self.last_decision = Decision(Action.HOLD, verdict.reason, verdict.message)
                return self.last_decision
        observed = has_taint(node, self.config.taint)
        if self.decider.tainted is None:
            self.decider.tainted = observed
            ago = self.claim.adopted_flip(node)  # min_flip_interval holds across terms
            if ago is not None:
                self.decider.last_flip_at = now - ago
        reading = await self._read(signal)
        free = None if reading is None else reading.free_gpus
        measure = "free local GPUs"
        if self.returns is not None and self.config.return_home.enabled and self.view.synced:
            plan = await self.returns.tick(self.view, now)  # marks the wave (docs/gate.md)
            if plan.applies and free is not None:
                free, measure = plan.units, "GPUs of external replicas that fit locally"
        pods = list(self.view.all_pods())
        blocking = blocking_pods(pods, node, self.config.taint) if node else []
        self.blocked = [pod_key(p) for p in await self.holds.admit(blocking, now, self.events)]
        metrics.STATE.set("pending_blocked_pods", len(self.blocked), node=self.node_name)
        decision = self.decider.decide(
            Observation(
                now=now,
                free_gpus=free,
                error=self.last_error,
                preempting=max(
                    0 if reading is None else reading.preempting, preempting(pods, self.node_name)
                ),
                pending_unschedulable=len(self.blocked),
                measure=measure,
            )
        )
        self.last_decision = decision
        if decision.action is not Action.HOLD:
            await self._flip(decision, node, now)
        elif (
            not self.config.dry_run
            and None not in (observed, self.decider.tainted)
            and observed != self.decider.tainted
        ):
            await self._reassert()
        metrics.STATE.set("tainted", 1 if self.decider.tainted else 0, node=self.node_name)
        return decision

    async def _flip(self, decision: Decision, node: dict[str, Any] | None, now: float) -> None:
        present = decision.action is Action.TAINT
        verb = "tainting" if present else "untainting"
        if node is None and not self.config.dry_run:
            if not self._waiting_for_node:
                log.warning("gate: node %s does not exist (yet); not %s it", self.node_name, verb)
            self._waiting_for_node = True
            return
        self._waiting_for_node = False
        if self.config.dry_run:
            log.info("dry-run: would be %s node %s: %s", verb, self.node_name, decision.message)
        else:
            try:
                await self.writer.set(present)
            except KubeError as exc:
                log.warning("gate: %s node %s failed: %s; will retry", verb, self.node_name, exc)
                return
            log.info("gate: %s node %s: %s", verb, self.node_name, decision.message)
        self.decider.flipped(present, now)
        if not self.config.dry_run:
            self.claim.flipped()
            await self.claim.renew(node, force=True)
        direction = "taint" if present else "untaint"
        metrics.FLIPS.labels(self.node_name, direction).inc()
        self.flips = [
            *self.flips[-19:],
            {
                "at": time.time(),
                "direction": direction,
                "reason": decision.reason,
                "message": decision.message,
            },
        ]
        if decision.reason == "SignalUnavailable":
            metrics.FAIL_OPEN.labels(self.node_name).inc()
        if not self.config.dry_run and node is not None:
            kind: EventType = "Warning" if decision.reason == "SignalUnavailable" else "Normal"
            involved = {
                "apiVersion": "v1",
                "kind": "Node",
                "name": self.node_name,
                "uid": node["metadata"]["uid"],
            }
            await self.events.record(involved, kind, decision.reason, decision.message)

    async def _node(self) -> JSON | None:
        """The virtual node: from the informer once it synced, else one GET (so a gate whose
        caches never sync still judges its claim and can fail open)."""
        assert self.view is not None
        if self.view.nodes_synced:
            return self.view.node(self.node_name)
        try:
            return await resources.get_node(self.kube, self.node_name)
        except KubeError as exc:
            log.warning("gate: cannot read node %s: %s", self.node_name, exc)
            return None

    async def _reassert(self) -> None:
        want = bool(self.decider.tainted)
        try:
            if await self.writer.set(want):
                log.warning("gate: re-asserted its taint state (%s) on node %s", want, self.node_name)
        except KubeError as exc:
            log.warning("gate: could not re-assert the taint on %s: %s", self.node_name, exc)

    def snapshot(self) -> dict[str, Any]:
        """The gate for the admin ``/state``."""
        reading = self.last_reading
        decision = self.last_decision
        c = self.config
        return {
            "node": self.node_name,
            "running": self.running,
            "dry_run": c.dry_run,
            "signal": c.signal.kind,
            "tainted": self.decider.tainted,
            "taint": c.taint.as_taint(),
            "thresholds": {
                "taint_at_free_gpus": c.taint_at_free_gpus,
                "untaint_below_free_gpus": c.untaint_below_free_gpus,
                "dwell_seconds": c.dwell_seconds,
                "min_flip_interval_seconds": c.min_flip_interval_seconds,
                "signal_timeout_seconds": c.signal_timeout_seconds,
            },
            "free_gpus": None if reading is None else reading.free_gpus,
            "per_node": {} if reading is None else reading.detail,
            "preempting": 0 if reading is None else reading.preempting,
            "signal_error": self.last_error or None,
            "pending_blocked": self.blocked[:20],
            "decision": None
            if decision is None
            else {"action": decision.action.value, "reason": decision.reason, "message": decision.message},
            "recent_flips": self.flips,
            "return_home": self.returns.snapshot() if self.returns else {},
        }
