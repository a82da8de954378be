"""The node agent: makes the virtual Node real and keeps it honest (DESIGN §4.1-4.3, §5.5).

Three supervised loops share a little state:

* probe  — every ``probe_seconds`` ping every provider; a change in reachability, capacity or
  the circuit breaker wakes the status loop at once, and each change is a Node Event and one
  log line (a provider going unreachable is a Warning, its recovery Normal/INFO);
* lease  — every ``lease_renew_seconds`` renew the Lease, **whatever the providers say**: the
  Lease means "vkprovider is alive". A provider API outage must not make the node-lifecycle
  controller taint the node ``unreachable:NoExecute`` and evict every pod (the Go library stops
  renewing on a failed ping; we differ on purpose, see docs/operations.md);
* status — the only writer of the Node after registration: a heartbeat about every
  ``status_update_seconds`` and an immediate write when something changed. ``Ready`` stays True;
  ``ProvidersReachable`` names the unreachable providers; when no provider can take new pods the
  circuit breaker (taint + zero GPUs) stops new placements. A Node deleted under us is recreated
  (and the Lease's ownerReference follows the new UID).

Steady state costs ``60/lease_renew_seconds + 60/status_update_seconds`` API calls a minute
(7 with the defaults); probes and change detection read only in-memory state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from vkprovider.config import NodeConfig
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeError, KubeNotFound
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.gate_heartbeat import DEFAULT_TAINT_KEY
from vkprovider.node.capacity import PodSource, current_capacity
from vkprovider.node.conditions import Reachability
from vkprovider.node.events import COMPONENT, NodeEvents
from vkprovider.node.gate_liveness import GateLiveness
from vkprovider.node.lease import NodeLease
from vkprovider.node.manifest import NodeState
from vkprovider.node.probe import Prober
from vkprovider.node.status import NodeObject
from vkprovider.placement.service import Placer
from vkprovider.plugins.api import Provider
from vkprovider.tasks import supervise

log = logging.getLogger(__name__)


class NodeAgent:
    """``await register()`` once (or let ``run()`` do it), then ``await run()`` until cancelled.

    Run it under a ``LeaderElector`` when there are several replicas: only the leader may write.
    ``pods`` (the pod controller's cache) makes allocatable count the GPUs its pods request."""

    def __init__(
        self,
        kube: KubeClient,
        node_config: NodeConfig,
        providers: Mapping[str, Provider],
        placer: Placer,
        *,
        probe_timeout: float = 5.0,
        retry_seconds: float = 1.0,
        pods: PodSource | None = None,
        heartbeat: KubeClient | None = None,
        gate_taint_key: str = DEFAULT_TAINT_KEY,
        gate_timeout_seconds: float = 120.0,
    ) -> None:
        self.config = node_config
        self.placer = placer
        # The Node and its Lease go through ``heartbeat`` when given (the service's unthrottled
        # sibling client, ``KubeClient.sibling``), Events through ``kube``: a heartbeat must
        # never wait behind pod traffic or authentication reviews.
        beat = heartbeat or kube
        self.node = NodeObject(beat, node_config)
        self.lease = NodeLease(beat, node_config.name, duration_seconds=node_config.lease_duration_seconds)
        self.prober = Prober(providers, placer.health, timeout=probe_timeout)
        self.events = NodeEvents(kube, node_config.name)
        # The capacity gate's taint must not outlive the gate (node/gate_liveness.py).
        self.gate_liveness = GateLiveness(
            beat,
            node_config.name,
            EventRecorder(kube, component=COMPONENT, host=node_config.name),
            taint_key=gate_taint_key,
            orphan_timeout_seconds=gate_timeout_seconds,
        )
        self._pods = pods
        self._retry = retry_seconds
        self._status_wake = asyncio.Event()
        self._lease_wake = asyncio.Event()
        self._registered = False
        # What the Node's status says, as far as we wrote it (None: nothing written yet).
        self._said_conditions: tuple[bool, Reachability] | None = None
        self._said_gpus: int | None = None
        self._heartbeat_at = 0.0  # monotonic time of the last condition heartbeat

    # State ----------------------------------------------------------------------------------
    @property
    def backend_up(self) -> bool:
        """Some provider answers its probe (for the admin API; the node is Ready regardless)."""
        return self.prober.backend_up

    def desired(self) -> NodeState:
        """What the node should advertise now, from probes, catalogs and the breaker (no I/O)."""
        cap = current_capacity(self.placer, self._pods, cap=self.config.max_gpus)
        return NodeState(
            ready=True,
            gpus=cap.gpus,
            gpu_types=cap.gpu_types,
            breaker_open=cap.breaker_open,
            reachability=self.prober.reachability(),
            max_gpus_per_pod=cap.max_per_pod,
        )

    def _status_due(self, state: NodeState) -> tuple[bool, bool]:
        """(write status?, include conditions?)."""
        changed = self._said_conditions != (state.ready, state.reachability)
        heartbeat = time.monotonic() - self._heartbeat_at >= self.config.status_update_seconds
        conditions = changed or heartbeat
        return conditions or state.gpus != self._said_gpus, conditions

    def _said(self, state: NodeState, *, conditions: bool) -> None:
        if conditions:
            self._said_conditions = (state.ready, state.reachability)
            self._heartbeat_at = time.monotonic()
        self._said_gpus = state.gpus

    # Registration ---------------------------------------------------------------------------
    async def register(self) -> None:
        """Create the Node, or bring an existing one (a restart) to what we advertise, keeping
        labels, taints and conditions that belong to other writers. Then renew the Lease once."""
        catalogs = self.placer.catalog.providers.values()
        if any(c.fetched_at is None for c in catalogs):
            await self.placer.refresh()
        await self.prober.probe_all()
        state = self.desired()
        if await self.node.ensure(state):
            self._said(state, conditions=True)
        else:
            await self.node.sync_metadata(state)
            await self.node.patch_status(state, conditions=True)
            self._said(state, conditions=True)
        if self.node.uid:
            await self.lease.renew(self.node.uid)
        self._registered = True
        await self._report_changes(state)

    # Loops ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Register (retrying until it works), then run the loops until cancelled."""
        if not self._registered:
            await supervise("node-register", self.register, restart_delay=self._retry, max_delay=30.0)
        async with asyncio.TaskGroup() as group:
            for name, loop in (
                ("node-probe", self._probe_loop),
                ("node-lease", self._lease_loop),
                ("node-status", self._status_loop),
                ("node-gate-liveness", self._gate_liveness_loop),
            ):
                group.create_task(supervise(name, loop, restart_delay=self._retry), name=name)

    async def _probe_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.probe_seconds)
            await self.prober.probe_all()
            state = self.desired()
            due, _ = self._status_due(state)
            if due or self._metadata_changed(state):
                self._status_wake.set()
            await self._report_changes(state)

    async def _report_changes(self, state: NodeState) -> None:
        """One Event and one log line per provider reachability change and breaker flip."""
        if self.node.uid is not None:
            await self.events.report(self.node.uid, state.reachability, state.breaker_open)

    async def _lease_loop(self) -> None:
        while True:
            delay = self.config.lease_renew_seconds
            uid = self.node.uid
            if uid is not None:
                try:
                    await self.lease.renew(uid)
                except KubeError as exc:
                    log.warning("lease renewal failed: %s", exc, extra={"node": self.config.name})
                    delay = min(delay, self._retry)
            await _wait(self._lease_wake, delay)

    async def _status_loop(self) -> None:
        while True:
            left = self._heartbeat_at + self.config.status_update_seconds - time.monotonic()
            await _wait(self._status_wake, max(left, 0.0))
            try:
                await self.sync()
            except KubeError as exc:
                log.warning("node status update failed: %s", exc, extra={"node": self.config.name})
                await asyncio.sleep(self._retry)

    async def _gate_liveness_loop(self) -> None:
        """Remove the capacity gate's taint once its heartbeat is stale (a stopped gate)."""
        while True:
            await asyncio.sleep(self.gate_liveness.period(self.config.probe_seconds))
            try:
                fresh = await self.gate_liveness.check(self.node.node)
            except KubeError as exc:
                log.warning("gate liveness check failed: %s", exc, extra={"node": self.config.name})
                continue
            if fresh is not None:
                self.node.node = fresh  # a newer copy for the next scoped write

    def _metadata_changed(self, state: NodeState) -> bool:
        return self.node.node is not None and self.node.metadata_patch(state) is not None

    async def sync(self) -> None:
        """One status pass: write what is due; recreate the Node if it was deleted."""
        state = self.desired()
        due, conditions = self._status_due(state)
        try:
            if due:
                await self.node.patch_status(state, conditions=conditions)
                self._said(state, conditions=conditions)
            await self.node.sync_metadata(state)
        except KubeNotFound:
            log.warning("node was deleted; recreating it", extra={"node": self.config.name})
            if not await self.node.create(state):  # someone recreated it first: bring theirs in line
                await self.node.patch_status(state, conditions=True)
                await self.node.sync_metadata(state)
            self._said(state, conditions=True)
            self._lease_wake.set()  # re-point the Lease's ownerReference at the new UID


async def _wait(event: asyncio.Event, timeout: float) -> None:
    """Sleep up to ``timeout``, waking early when ``event`` is set (and clear it)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    event.clear()
