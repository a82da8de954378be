"""The Node object in the API: create it, and write only the parts this agent owns.

Other writers share the object, so every write is scoped:

* status goes through a strategic-merge patch of ``nodes/<name>/status``: conditions merge by
  ``type`` and capacity by resource name, so a foreign condition or extended resource survives;
* labels are merged key by key; the only keys ever removed are ``gpu.vkprovider.io/*`` ones for
  GPU types no provider offers any more;
* ``spec.taints`` is an atomic list, so taints are read-modify-written with the node's
  ``resourceVersion`` as a precondition (a concurrent writer turns our write into a 409 and we
  re-read), and only the keys in ``OWNED_TAINT_KEYS`` are added or removed.

Every response is kept as ``self.node`` so the next write starts from a fresh view without a GET.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from vkprovider.config import NodeConfig
from vkprovider.kube import resources
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeNotFound
from vkprovider.kube.gate_heartbeat import MAX_GPUS_PER_POD_LABEL
from vkprovider.node.conditions import build_conditions
from vkprovider.node.manifest import (
    GPU_LABEL_PREFIX,
    NodeState,
    build_node,
    config_taint_note,
    merge_taints,
    node_labels,
    node_status,
    owned_keys,
    owned_taints,
)
from vkprovider.taint_config import CONFIG_TAINTS_ANNOTATION

log = logging.getLogger(__name__)

JSON = dict[str, Any]
_CONFLICT_RETRIES = 5


class NodeObject:
    def __init__(self, kube: KubeClient, cfg: NodeConfig) -> None:
        self._kube = kube
        self._cfg = cfg
        self.node: JSON | None = None  #: the Node as the API last returned it
        self.creations = 0

    @property
    def name(self) -> str:
        return self._cfg.name

    @property
    def uid(self) -> str | None:
        return None if self.node is None else str(self.node["metadata"]["uid"])

    def _conditions(self) -> list[JSON]:
        return list(((self.node or {}).get("status") or {}).get("conditions") or [])

    async def ensure(self, state: NodeState) -> bool:
        """Read the node, creating it if missing; True if this call created it."""
        self.node = await resources.get_node(self._kube, self.name)
        if self.node is not None:
            return False
        return await self.create(state)

    async def create(self, state: NodeState) -> bool:
        """Create the node in full; if someone else created it meanwhile, adopt theirs (False)."""
        conditions = build_conditions(
            state.ready, state.not_ready_message, datetime.now(UTC), reachability=state.reachability
        )
        try:
            self.node = await resources.create_node(self._kube, build_node(self._cfg, state, conditions))
        except KubeConflict:
            self.node = await resources.get_node(self._kube, self.name)
            if self.node is None:
                raise
            return False
        self.creations += 1
        log.info("registered node", extra={"node": self.name, "uid": self.uid})
        return True

    async def patch_status(self, state: NodeState, *, conditions: bool) -> None:
        """Capacity, addresses, endpoints, node info, and (if ``conditions``) our conditions
        with a fresh heartbeat. Raises ``KubeNotFound`` if the node was deleted."""
        conds = None
        if conditions:
            conds = build_conditions(
                state.ready,
                state.not_ready_message,
                datetime.now(UTC),
                self._conditions(),
                reachability=state.reachability,
            )
        self.node = await resources.patch_node_status(
            self._kube, self.name, node_status(self._cfg, state.gpus, conds)
        )

    def metadata_patch(self, state: NodeState) -> JSON | None:
        """The merge patch that brings labels and our taints (with the configured ones, and
        the note of which those are) to ``state``; None if nothing differs."""
        assert self.node is not None
        meta, spec = self.node["metadata"], self.node.get("spec") or {}
        current_labels: Mapping[str, str] = meta.get("labels") or {}
        wanted = node_labels(self._cfg, sorted(state.gpu_types), state.max_gpus_per_pod)
        labels: dict[str, str | None] = {k: v for k, v in wanted.items() if current_labels.get(k) != v}
        for key in current_labels:
            if (key.startswith(GPU_LABEL_PREFIX) or key == MAX_GPUS_PER_POD_LABEL) and key not in wanted:
                labels[key] = None  # a GPU type (or any offer) no longer listed
        current_taints = list(spec.get("taints") or [])
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        taints = merge_taints(
            current_taints, owned_taints(state.breaker_open, self._cfg), owned_keys(self._cfg, annotations)
        )
        patch: JSON = {}
        if labels:
            patch["metadata"] = {"labels": labels}
        note = config_taint_note(self._cfg)
        if annotations.get(CONFIG_TAINTS_ANNOTATION) != note:  # which config taints are ours
            patch.setdefault("metadata", {})["annotations"] = {CONFIG_TAINTS_ANNOTATION: note}
        if taints != current_taints:
            patch["spec"] = {"taints": taints}
        if not patch:
            return None
        patch.setdefault("metadata", {})["resourceVersion"] = meta["resourceVersion"]
        return patch

    async def sync_metadata(self, state: NodeState, *, refresh: bool = False) -> bool:
        """Bring labels and owned taints to ``state``; True if a write was needed.

        Free when the cached node already matches. Raises ``KubeNotFound`` if the node is gone.
        """
        if refresh or self.node is None:
            await self._reread()
        for _ in range(_CONFLICT_RETRIES):
            patch = self.metadata_patch(state)
            if patch is None:
                return False
            try:
                self.node = await self._kube.request(
                    "PATCH", resources.api_path("nodes", self.name), body=patch, content_type=MERGE_PATCH
                )
            except KubeConflict:
                await self._reread()  # someone else wrote the node: recompute from their version
                continue
            return True
        raise KubeConflict(409, f"node {self.name}: taints kept changing under {_CONFLICT_RETRIES} writes")

    async def _reread(self) -> None:
        node = await resources.get_node(self._kube, self.name)
        if node is None:
            raise KubeNotFound(404, f"node {self.name} not found")
        self.node = node
