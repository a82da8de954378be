"""The wave planner's hands: read the replica owners' templates, write and remove the marks, and
say when a workload did not come home.

Kept apart from the pure planner (``vkprovider.gate.wave``) so the planner is unit-tested on
plain dicts and this stays a thin layer of API calls. A mark is a label on the pod (merge patch
of ``metadata.labels``; ``null`` removes it); the pod's controller ignores it (its selector still
matches). In dry-run nothing is written and the plan is only logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from vkprovider.gate.config import GateConfig
from vkprovider.gate.view import ClusterView
from vkprovider.gate.wave import Owner, Plan, WavePlanner, owner_of
from vkprovider.kube import resources
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeError, KubeNotFound
from vkprovider.kube.events import EventRecorder

log = logging.getLogger(__name__)

_OWNER_PATHS = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}


class ReturnHome:
    """One leadership term's wave state: build it fresh in each ``Gate.run``."""

    def __init__(self, kube: KubeClient, config: GateConfig, node_name: str, events: EventRecorder) -> None:
        self.kube = kube
        self.config = config.return_home
        self.dry_run = config.dry_run
        self.node_name = node_name
        self.events = events
        self.planner = WavePlanner(config.return_home, node_name, config.taint)
        self._pins: dict[str, tuple[str | None, float]] = {}  #: owner UID -> (template nodeName, read at)
        self._pdbs: dict[str, tuple[list[Any], float]] = {}  #: namespace -> (budgets, read at)
        self.last: Plan | None = None

    async def _read_pins(self, owners: set[Owner], now: float) -> dict[str, str | None]:
        """Owner UID -> its template's ``spec.nodeName`` ('' none; None when it cannot be read)."""
        pins: dict[str, str | None] = {}
        for owner in owners:
            cached = self._pins.get(owner.uid)
            if cached is not None and now - cached[1] < self.config.owner_refresh_seconds:
                pins[owner.uid] = cached[0]
                continue
            path = resources.api_path(
                _OWNER_PATHS[owner.kind], owner.name, namespace=owner.namespace, group="apps"
            )
            try:
                body = await self.kube.request("GET", path)
            except KubeNotFound:
                pin: str | None = None
            except KubeError as exc:
                log.warning("gate: cannot read %s (%s): its replicas are not marked", owner, exc)
                pin = None
            else:
                if (body.get("metadata") or {}).get("uid") != owner.uid:
                    pin = None
                else:
                    pin = str(
                        ((body.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeName") or ""
                    )
            self._pins[owner.uid] = (pin, now)
            pins[owner.uid] = pin
        return pins

    async def _read_pdbs(self, namespaces: set[str], now: float) -> dict[str, list[Any]] | None:
        """Namespace -> its PodDisruptionBudgets (``None``: not required by the config)."""
        if not self.config.require_pdb:
            return None
        out: dict[str, list[Any]] = {}
        for namespace in namespaces:
            cached = self._pdbs.get(namespace)
            if cached is not None and now - cached[1] < self.config.owner_refresh_seconds:
                out[namespace] = cached[0]
                continue
            path = resources.api_path("poddisruptionbudgets", namespace=namespace, group="policy")
            try:
                items = list((await self.kube.request("GET", path)).get("items") or [])
            except KubeError as exc:
                log.warning("gate: cannot list PodDisruptionBudgets in %s (%s)", namespace, exc)
                items = []
            self._pdbs[namespace] = (items, now)
            out[namespace] = items
        return out

    async def tick(self, view: ClusterView, now: float) -> Plan:
        """Plan this tick's wave and write its marks; a planner bug logs and plans nothing (the
        taint then follows the raw reading) rather than stopping the gate."""
        try:
            return await self._tick(view, now)
        except KubeError:
            raise
        except Exception:
            log.exception("gate: planning the return wave failed; no wave this tick")
            return Plan()

    async def _tick(self, view: ClusterView, now: float) -> Plan:
        pods = list(view.all_pods())
        nodes = list(view.all_nodes())
        owners = {
            o
            for p in pods
            if (p.get("spec") or {}).get("nodeName") == self.node_name and (o := owner_of(p)) is not None
        }
        gangs = view.kueue.gangs(pods) if view.kueue is not None else []
        if gangs is None:  # Kueue's caches still syncing: a wave now could fill a gang's GPUs
            log.debug("gate: waiting for Kueue's Workloads and queues before planning the wave")
            return Plan()
        pins = await self._read_pins(owners, now)
        pdbs = await self._read_pdbs({o.namespace for o in owners}, now)
        # in a worker thread: a plan over a large cluster takes a while (bench/bench_gate_wave.py)
        # and the service's other loops share this event loop; the lists are this tick's copies
        plan = await asyncio.to_thread(self.planner.plan, nodes, pods, now, pins, pdbs, gangs)
        self.last = plan
        for failure in plan.failures:
            log.warning("gate: %s: replica %s did not come home: %s", failure.owner, failure.pod, failure.why)
        if self.dry_run:
            if plan.mark or plan.unmark:
                log.info(
                    "dry-run: would mark %s, unmark %s",
                    [p["metadata"]["name"] for p in plan.mark],
                    [p["metadata"]["name"] for p in plan.unmark],
                )
            return plan
        for pod in plan.mark:
            await self._label(pod, "true")
        for pod in plan.unmark:
            await self._label(pod, None)
        for failure in plan.failures:
            await self.events.record(
                {
                    "apiVersion": "apps/v1",
                    "kind": failure.owner.kind,
                    "name": failure.owner.name,
                    "namespace": failure.owner.namespace,
                    "uid": failure.owner.uid,
                },
                "Warning",
                "ReturnHomeFailed",
                f"replica {failure.pod} of {failure.owner} did not come home: {failure.why}; "
                f"its replicas are not marked to return for {self.config.backoff_seconds:g}s",
            )
        return plan

    async def _label(self, pod: Mapping[str, Any], value: str | None) -> None:
        meta = pod["metadata"]
        patch = {"metadata": {"labels": {self.config.mark_label: value}, "uid": meta.get("uid")}}
        path = resources.api_path("pods", meta["name"], namespace=meta["namespace"])
        try:
            await self.kube.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        except KubeError as exc:  # gone meanwhile, or forbidden: the next tick re-plans
            log.info(
                "gate: %s mark on %s/%s failed: %s",
                "setting" if value else "removing",
                meta["namespace"],
                meta["name"],
                exc,
            )
        else:
            log.info("gate: %s %s/%s", "marked" if value else "unmarked", meta["namespace"], meta["name"])

    def snapshot(self) -> dict[str, Any]:
        plan = self.last
        if plan is None:
            return {}
        return {
            "wave": plan.wave[:50],
            "in_flight": plan.in_flight[:50],
            "stay": dict(list(plan.stay.items())[:20]),
            "units": plan.units,
            "kueue_gangs": plan.gangs[:20],
            "backing_off": sorted(self.planner.backoff),
        }
