"""The node agent's half of the gate's liveness: remove the gate's taint once no gate keeps it.

The capacity gate taints the virtual node while local GPUs are free. A gate that stopped (killed,
its ``gate:`` section removed, its caches never synced) would leave that taint for good, and
the next preemption would leave inference Pending with nowhere to burst. The node agent is
alive whenever bursting is possible, so it is the one that notices: the gate renews a heartbeat
annotation on the node (``vkprovider/kube/gate_heartbeat.py``), and once that heartbeat is older
than its own timeout the agent removes the taint it names, with a Warning Event
(``GateHeartbeatExpired``) saying whose heartbeat and how old.

* A taint with the gate's key but **no heartbeat** (a gate from before heartbeats, a hand-made
  taint) is treated as stale too, after ``orphan_timeout_seconds`` of the agent seeing it.
* A node annotated ``vkprovider.io/gate-paused`` is the operator's: nothing is removed.
* Cost: the agent judges its cached Node every ``period()`` (its status writes keep that copy
  current); it reads the Node every quarter heartbeat-timeout while a gate heartbeats there
  (so a taint added since the copy is seen in time), and to confirm before it writes; a node no
  gate heartbeats costs no reads. The removal is a read-modify-write
  guarded by ``resourceVersion`` and re-judged on the fresh read, so a gate renewing at the
  same moment wins and keeps its taint. Only the one taint key is touched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vkprovider.kube import resources
from vkprovider.kube.client import JSON, MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.gate_heartbeat import (
    DEFAULT_TAINT_KEY,
    HEARTBEAT_ANNOTATION,
    Heartbeat,
    node_annotations,
    paused,
    read_heartbeat,
)

log = logging.getLogger(__name__)

_ATTEMPTS = 5


@dataclass(frozen=True)
class Expired:
    key: str  #: the taint to remove
    message: str  #: why (the Event's message)


class GateLiveness:
    def __init__(
        self,
        kube: KubeClient,
        node_name: str,
        events: EventRecorder,
        *,
        taint_key: str = DEFAULT_TAINT_KEY,
        orphan_timeout_seconds: float = 120.0,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self.node_name = node_name
        self._events = events
        self.taint_key = taint_key
        self.orphan_timeout = orphan_timeout_seconds
        self._wall = wall
        self._clock = clock
        self._orphan_since: float | None = None  #: when a heartbeat-less gate taint was first seen
        self._read_at: float | None = None  #: when the node was last read from the API
        self._heartbeat_timeout: float | None = None  #: the last heartbeat's timeout
        self._malformed = ""  #: the last malformed-heartbeat message logged (log it once)
        self.removed = 0

    def period(self, cap: float) -> float:
        """How often to judge: a few times per heartbeat timeout, at most every ``cap`` s."""
        timeout = self._heartbeat_timeout or self.orphan_timeout
        return max(0.2, min(cap, timeout / 4))

    def _heartbeat(self, node: Mapping[str, Any]) -> Heartbeat | None:
        try:
            beat = read_heartbeat(node)
        except ValueError as exc:
            if str(exc) != self._malformed:
                self._malformed = str(exc)
                log.warning("%s; treating the gate taint as having no heartbeat", exc)
            return None
        if beat is not None:
            self._heartbeat_timeout = beat.timeout_seconds
        return beat

    def judge(self, node: Mapping[str, Any] | None, *, track: bool = True) -> Expired | None:
        """The gate taint to remove from ``node`` now, or None. ``track=False`` (an old cached
        copy) leaves the no-heartbeat timer alone and reports any such taint as a suspect."""
        if node is None or paused(node):
            if track:
                self._orphan_since = None
            return None
        beat = self._heartbeat(node)
        key = beat.taint_key if beat is not None else self.taint_key
        taints = (node.get("spec") or {}).get("taints") or []
        if not any(t.get("key") == key for t in taints):
            if track:
                self._orphan_since = None
            return None
        if beat is not None:
            if track:
                self._orphan_since = None
            now = self._wall()
            if not beat.stale(now):
                return None
            return Expired(
                key,
                f"gate {beat.owner!r} stopped renewing its heartbeat ({HEARTBEAT_ANNOTATION} is "
                f"{beat.age(now):.0f}s old, timeout {beat.timeout_seconds:.0f}s): removed its taint "
                f"{key!r} so pods may burst out again",
            )
        if not track:
            return Expired(key, "suspect: a gate taint without a heartbeat")
        now = self._clock()
        if self._orphan_since is None:
            self._orphan_since = now
        held = now - self._orphan_since
        if held < self.orphan_timeout:
            return None
        return Expired(
            key,
            f"taint {key!r} has had no gate heartbeat ({HEARTBEAT_ANNOTATION}) for {held:.0f}s "
            f"(timeout {self.orphan_timeout:.0f}s): no gate maintains it; removed it so pods may "
            "burst out again",
        )

    async def check(self, cached: JSON | None) -> JSON | None:
        """Judge ``cached`` (the agent's last copy of the Node); read the Node when the copy is
        old or suggests removal, and remove a stale gate taint. Returns the Node if read."""
        now = self._clock()
        if cached is not None and self.judge(cached, track=False) is None:
            refresh = (self._heartbeat_timeout or self.orphan_timeout) / 4
            gated = HEARTBEAT_ANNOTATION in node_annotations(cached)
            if not gated or (self._read_at is not None and now - self._read_at < refresh):
                return None
        fresh: JSON | None = None
        for _ in range(_ATTEMPTS):
            fresh = await resources.get_node(self._kube, self.node_name)
            self._read_at = self._clock()
            expired = self.judge(fresh)
            if fresh is None or expired is None:
                return fresh
            try:
                fresh = await self._remove(fresh, expired.key)
            except KubeConflict:
                continue  # someone wrote the node meanwhile (perhaps the gate renewing): re-judge
            self.removed += 1
            self._orphan_since = None
            log.warning("node %s: %s", self.node_name, expired.message)
            meta = fresh["metadata"]
            involved = {
                "apiVersion": "v1",
                "kind": "Node",
                "name": self.node_name,
                "uid": meta.get("uid", ""),
            }
            await self._events.record(involved, "Warning", "GateHeartbeatExpired", expired.message)
            return fresh
        return fresh

    async def _remove(self, node: JSON, key: str) -> JSON:
        taints = list((node.get("spec") or {}).get("taints") or [])
        patch = {
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": [t for t in taints if t.get("key") != key]},
        }
        written: JSON = await self._kube.request(
            "PATCH", resources.api_path("nodes", self.node_name), body=patch, content_type=MERGE_PATCH
        )
        return written
