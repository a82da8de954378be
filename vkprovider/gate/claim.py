"""The gate's claim on the virtual node: may it write the taint now, and keep its heartbeat fresh.

Three standings, judged every tick from the node (``vkprovider/kube/gate_heartbeat.py`` holds
the annotation's format and why it exists):

* **owner** — no heartbeat, our own, or another gate's that is stale: write the taint, and renew
  the heartbeat at most every ``signal_timeout/4`` (and after each flip, carrying its time);
* **foreign** — another gate's heartbeat is fresh: write nothing (not even a heartbeat), say so
  once (Warning Event ``GateOwnerConflict``, a log line, ``vkprovider_gate_owner_conflict``),
  keep checking, take over once it is stale. Two gates on one node no longer undo each other;
* **paused** — ``vkprovider.io/gate-paused`` is set: the operator owns the taint; write none.

The heartbeat's timeout is three quarters of ``signal_timeout_seconds`` and it is renewed every
quarter, so a late tick or a missed renewal is tolerated, and the node agent (which checks a
few times per heartbeat timeout) removes the taint of a dead gate within
``signal_timeout_seconds``. Every heartbeat write is a
read-modify-write guarded by the node's ``resourceVersion``, re-judged on the fresh read, so two
gates taking over at once cannot both win.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from vkprovider.gate import metrics
from vkprovider.kube import resources
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeError
from vkprovider.kube.events import EventRecorder, EventType
from vkprovider.kube.gate_heartbeat import (
    HEARTBEAT_ANNOTATION,
    PAUSED_ANNOTATION,
    Heartbeat,
    paused,
    read_heartbeat,
)
from vkprovider.retry import retrying

log = logging.getLogger(__name__)


def default_identity(role: str) -> str:
    """``<host>/<role>``: stable across restarts of one pod, different between two deployments
    (and between ``serve``'s gate and a standalone one on the same host)."""
    return f"{socket.gethostname()}/{role}"


class Standing(Enum):
    OWNER = "owner"
    FOREIGN = "foreign"
    PAUSED = "paused"


@dataclass(frozen=True)
class Verdict:
    standing: Standing
    reason: str  #: Event reason / decision reason
    message: str


class Claim:
    def __init__(
        self,
        kube: KubeClient,
        node_name: str,
        *,
        identity: str,
        taint_key: str,
        signal_timeout_seconds: float,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self.node_name = node_name
        self.identity = identity
        self.taint_key = taint_key
        self.timeout = signal_timeout_seconds * 3 / 4
        self.renew_every = signal_timeout_seconds / 4
        self._wall = wall
        self.last_flip: float | None = None  #: wall time of the last flip (ours, or adopted)
        self.standing: Standing | None = None  #: as last reported
        self.renewals = 0

    # Judging ---------------------------------------------------------------------------------
    def judge(self, node: Mapping[str, Any] | None) -> Verdict:
        if paused(node):
            return Verdict(
                Standing.PAUSED,
                "GatePaused",
                f"annotation {PAUSED_ANNOTATION} is set: the operator owns the taint; the gate writes none",
            )
        theirs = self._heartbeat(node)
        if theirs is not None and theirs.owner != self.identity and not theirs.stale(self._wall()):
            return Verdict(
                Standing.FOREIGN,
                "GateOwnerConflict",
                f"gate {theirs.owner!r} owns the taint {theirs.taint_key!r} on node {self.node_name} "
                f"(heartbeat {theirs.age(self._wall()):.0f}s old, timeout {theirs.timeout_seconds:.0f}s); "
                f"gate {self.identity!r} writes nothing until that heartbeat is stale",
            )
        return Verdict(Standing.OWNER, "GateOwner", f"gate {self.identity!r} owns the taint")

    def _heartbeat(self, node: Mapping[str, Any] | None) -> Heartbeat | None:
        try:
            return read_heartbeat(node)
        except ValueError as exc:
            log.warning("gate: %s; treating it as absent", exc)
            return None

    def adopted_flip(self, node: Mapping[str, Any] | None) -> float | None:
        """Seconds since the node's last flip as its heartbeat says (a new term keeps the
        minimum flip interval), or None."""
        beat = self._heartbeat(node)
        if beat is None or beat.last_flip is None:
            return None
        self.last_flip = beat.last_flip
        return max(0.0, self._wall() - beat.last_flip)

    def flipped(self) -> None:
        """We just changed the taint: the next heartbeat carries the time."""
        self.last_flip = self._wall()

    async def check(self, node: Mapping[str, Any] | None, events: EventRecorder) -> Verdict:
        """One tick's judgement: report a change of standing, renew our heartbeat if due (also
        while paused: still alive, still the owner), and say whether the gate may write."""
        verdict = self.judge(node)
        await self.report(verdict, node, events)
        if verdict.standing is not Standing.FOREIGN:
            await self.renew(node)
        return verdict

    # Reporting -------------------------------------------------------------------------------
    async def report(self, verdict: Verdict, node: Mapping[str, Any] | None, events: EventRecorder) -> None:
        """A log line and an Event when the standing changes (never once per tick)."""
        metrics.STATE.set(
            "owner_conflict", 1 if verdict.standing is Standing.FOREIGN else 0, node=self.node_name
        )
        metrics.STATE.set("paused", 1 if verdict.standing is Standing.PAUSED else 0, node=self.node_name)
        previous, self.standing = self.standing, verdict.standing
        if previous is verdict.standing:
            return
        kind: EventType = "Normal"
        reason, message = verdict.reason, verdict.message
        if verdict.standing is Standing.FOREIGN:
            kind = "Warning"
            log.warning("gate: %s", message)
        elif verdict.standing is Standing.PAUSED:
            kind = "Warning"
            log.warning("gate: node %s: %s", self.node_name, message)
        elif previous is None:
            return  # a term starting as the owner is the ordinary case: nothing to say
        else:
            reason = "GateResumed"
            message = (
                f"gate {self.identity!r} owns the taint on {self.node_name} again (was {previous.value})"
            )
            log.info("gate: %s", message)
        if node is not None:
            meta = node.get("metadata") or {}
            involved = {
                "apiVersion": "v1",
                "kind": "Node",
                "name": self.node_name,
                "uid": meta.get("uid", ""),
            }
            await events.record(involved, kind, reason, message)

    # Heartbeat -------------------------------------------------------------------------------
    def _wanted(self) -> Heartbeat:
        return Heartbeat(
            owner=self.identity,
            renew_time=self._wall(),
            timeout_seconds=self.timeout,
            taint_key=self.taint_key,
            last_flip=self.last_flip,
        )

    def due(self, node: Mapping[str, Any] | None) -> bool:
        beat = self._heartbeat(node)
        if beat is None or beat.owner != self.identity:
            return True
        wanted = self._wanted()
        return (
            beat.age(wanted.renew_time) >= self.renew_every
            or beat.taint_key != wanted.taint_key
            or beat.timeout_seconds != wanted.timeout_seconds
            or (wanted.last_flip is not None and beat.last_flip != wanted.last_flip)
        )

    async def renew(self, node: Mapping[str, Any] | None, *, force: bool = False) -> bool:
        """Write our heartbeat if due (``force``: after a flip); True if written. Never raises
        for the API: a failed renewal is retried on the next tick."""
        if node is None or not (force or self.due(node)):
            return False
        try:
            async for attempt in retrying(base=0.02, cap=1.0, attempts=8, retry_on=(KubeConflict,)):
                with attempt:
                    return await self._write()
        except KubeError as exc:
            log.warning("gate: heartbeat on node %s not renewed: %s; will retry", self.node_name, exc)
        return False

    async def _write(self) -> bool:
        node = await resources.get_node(self._kube, self.node_name)
        if node is None or self.judge(node).standing is Standing.FOREIGN:
            return False  # gone, or another gate claimed it since our view was taken
        current = self._heartbeat(node)
        if self.last_flip is None and current is not None:
            self.last_flip = current.last_flip  # a new term: keep the node's last flip
        patch = {
            "metadata": {
                "resourceVersion": node["metadata"]["resourceVersion"],
                "annotations": {HEARTBEAT_ANNOTATION: self._wanted().to_annotation()},
            }
        }
        await self._kube.request(
            "PATCH", resources.api_path("nodes", self.node_name), body=patch, content_type=MERGE_PATCH
        )
        self.renewals += 1
        return True
