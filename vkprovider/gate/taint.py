"""Write the gate's one taint on the virtual node, and nothing else.

``spec.taints`` is an atomic list, so the write is a read-modify-write: the node's other taints
are copied unchanged (order kept, ``timeAdded`` kept), ours is added or removed (matched by key
and effect, the API's uniqueness rule), and the merge patch carries the read
``resourceVersion``: a concurrent writer turns ours into a 409, we re-read and recompute, so
their taint survives.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from vkprovider.gate.config import TaintConfig
from vkprovider.kube import resources
from vkprovider.kube.client import JSON, MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeNotFound
from vkprovider.retry import retrying

log = logging.getLogger(__name__)

_CONFLICT_RETRIES = 12


def is_ours(taint: Mapping[str, Any], cfg: TaintConfig) -> bool:
    return taint.get("key") == cfg.key and taint.get("effect") == cfg.effect


def has_taint(node: Mapping[str, Any] | None, cfg: TaintConfig) -> bool | None:
    """True/False for the node's current state; None when the node does not exist."""
    if node is None:
        return None
    taints = (node.get("spec") or {}).get("taints") or []
    return any(is_ours(t, cfg) and (t.get("value") or "") == cfg.value for t in taints)


def with_taint(current: Sequence[Mapping[str, Any]], cfg: TaintConfig, present: bool) -> list[JSON]:
    """``current`` with only our taint changed."""
    kept = [dict(t) for t in current if not is_ours(t, cfg)]
    if present:
        ours = [dict(t) for t in current if is_ours(t, cfg) and (t.get("value") or "") == cfg.value]
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kept.append(ours[0] if ours else {**cfg.as_taint(), "timeAdded": stamp})
    return kept


class TaintWriter:
    def __init__(self, kube: KubeClient, node_name: str, cfg: TaintConfig) -> None:
        self._kube = kube
        self.node_name = node_name
        self.cfg = cfg
        self.writes = 0
        self.conflicts = 0

    async def current(self) -> bool | None:
        return has_taint(await resources.get_node(self._kube, self.node_name), self.cfg)

    async def set(self, present: bool) -> bool:
        """Bring the node to ``present``; True if a write was needed. A 409 (someone wrote the
        node meanwhile) re-reads and recomputes, with backoff. Raises ``KubeNotFound`` when the
        node is gone and ``KubeConflict`` if it kept changing under every retry."""
        async for attempt in retrying(
            base=0.02, cap=1.0, attempts=_CONFLICT_RETRIES, retry_on=(KubeConflict,)
        ):
            with attempt:
                return await self._write(present)
        raise AssertionError("unreachable: retrying re-raises the last conflict")

    async def _write(self, present: bool) -> bool:
        node = await resources.get_node(self._kube, self.node_name)
        if node is None:
            raise KubeNotFound(404, f"node {self.node_name} not found")
        current = list((node.get("spec") or {}).get("taints") or [])
        wanted = with_taint(current, self.cfg, present)
        if wanted == current:
            return False
        patch = {
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": wanted},
        }
        try:
            await self._kube.request(
                "PATCH", resources.api_path("nodes", self.node_name), body=patch, content_type=MERGE_PATCH
            )
        except KubeConflict:
            self.conflicts += 1
            log.info("node %s changed under the taint write; re-reading", self.node_name)
            raise
        self.writes += 1
        return True
