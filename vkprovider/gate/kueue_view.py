"""What the gate sees of Kueue: Workloads, ClusterQueues and LocalQueues, from informers.

Optional: Kueue's API (``kueue.x-k8s.io/v1beta2``) is looked up in discovery first, and only
when it is served are the three informers started (an informer on a missing resource would
retry and warn forever). A cluster without Kueue reads no gangs and logs one line; the API is
looked up again every ``probe_seconds``, so installing Kueue later is picked up within a term.

LocalQueues are read because a pending Workload names only its LocalQueue (``spec.queueName``);
its ClusterQueue is in ``status.admission`` only once admitted.

Until the caches sync the wave waits (:meth:`KueueView.gangs` returns ``None``) — a wave
planned without the gangs could send replicas into their GPUs. That wait is bounded by
``sync_grace_seconds``: caches that never sync (the gate's role lacks the rights of
deploy/components/gate-kube-signal) must not switch the return off, so after it the wave plans
without gangs and says so once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from vkprovider.gate.gangs import Gang, admitted_next
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeError, KubeNotFound
from vkprovider.kube.informer import Handler, Informer

log = logging.getLogger(__name__)

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"


class KueueView:
    def __init__(
        self,
        kube: KubeClient,
        *,
        handler: Handler,
        probe_seconds: float = 300.0,
        sync_grace_seconds: float = 60.0,
    ) -> None:
        self._kube = kube
        self._probe_seconds = probe_seconds
        self._grace = sync_grace_seconds
        self.workloads = Informer(kube, f"{KUEUE_API}/workloads", handler=handler)
        self.cluster_queues = Informer(kube, f"{KUEUE_API}/clusterqueues", handler=handler)
        self.local_queues = Informer(kube, f"{KUEUE_API}/localqueues", handler=handler)
        self.installed: bool | None = None  #: None until discovery answered
        self._since = time.monotonic()  #: the wait for the caches starts (term start, API found)
        self._warned = False

    @property
    def _informers(self) -> tuple[Informer, ...]:
        return (self.workloads, self.cluster_queues, self.local_queues)

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers)

    async def _served(self) -> bool:
        try:
            await self._kube.request("GET", KUEUE_API)
        except KubeNotFound:
            return False
        return True

    async def run(self) -> None:
        """Probe discovery until Kueue's API is served, then follow the three resources."""
        told = False
        while True:
            try:
                served = await self._served()
            except KubeError as exc:
                log.warning("gate: cannot look up Kueue's API (%s); retrying in 10s", exc)
                await asyncio.sleep(10.0)
                continue
            else:
                if served:
                    break
                self.installed = False
                if not told:
                    log.info("gate: Kueue's API %s is not served: no pending gangs to reserve", KUEUE_API)
                    told = True
            await asyncio.sleep(self._probe_seconds)
        if self.installed is False:
            self._since = time.monotonic()  # installed during the term: its caches get the grace
        self.installed = True
        async with asyncio.TaskGroup() as group:
            for informer in self._informers:
                group.create_task(informer.run())

    def gangs(self, pods: Iterable[JSON] = ()) -> list[Gang] | None:
        """The gangs on their way and those Kueue admits next (``pods``: every live pod, to tell
        a gang whose pods exist already); ``[]`` without Kueue, ``None`` while the caches are
        syncing (the wave waits; see the module docstring)."""
        if self.installed is False:
            return []
        if not (self.installed and self.synced):
            if time.monotonic() - self._since < self._grace:
                return None
            if not self._warned:
                log.warning(
                    "gate: Kueue's Workloads, ClusterQueues and LocalQueues not listed within %gs "
                    "(does the gate's role grant them? deploy/components/gate-kube-signal): "
                    "the return wave does not reserve pending gangs",
                    self._grace,
                )
                self._warned = True
            return []
        return admitted_next(
            self.workloads.cache.values(),
            {_name(cq): cq for cq in self.cluster_queues.cache.values()},
            _by_key(self.local_queues.cache.values()),
            live_owners(pods),
        )


def live_owners(pods: Iterable[JSON]) -> set[str]:
    """The UIDs of the pods and of their owners (a Job's Workload is owned by the Job; a pod
    group's by its pods)."""
    out: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        out.add(str(meta.get("uid", "")))
        out.update(str(ref.get("uid", "")) for ref in meta.get("ownerReferences") or [])
    return out


def _name(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _by_key(objs: Iterable[JSON]) -> dict[str, JSON]:
    return {f"{(o.get('metadata') or {}).get('namespace', '')}/{_name(o)}": o for o in objs}
