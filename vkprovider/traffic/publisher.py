"""Keep each Service's vkprovider-managed EndpointSlices equal to what its external replicas say.

Three informers feed it — the pod controller's pods on the node and its cluster-wide Services,
and its own slices (label ``endpointslice.kubernetes.io/managed-by=vkprovider.io`` and this
node's ``vkprovider.io/node-name``) — and events only mark a Service dirty. One loop reconciles
dirty Services: the desired slices (:func:`slices.desired_slices`, from the pods' recorded routes)
against the cached ones, and only a difference is written (create, PUT guarded by
resourceVersion, delete). Nothing is polled and nothing lives only in memory: after a restart
(or in a new leadership term) the informers list, every Service is reconciled once, and slices
that are already right cost no write.

One owner: slices carry our ``managed-by`` value, so the cluster's EndpointSlice controller never
touches them, and we touch no slice without it (the controller's, a user's for a Service without
a selector). The ownerReference to the Service lets the garbage collector remove them with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from vkprovider.kube import resources
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeError
from vkprovider.kube.informer import Informer, object_key
from vkprovider.retry import Backoff
from vkprovider.traffic.route import ANNOTATION_ROUTE
from vkprovider.traffic.slices import (
    LABEL_MANAGED_BY,
    LABEL_NODE,
    LABEL_SERVICE_NAME,
    MANAGED_BY,
    desired_slices,
    differs,
    is_ready,
    is_terminal,
    node_label_value,
    selects,
)

log = logging.getLogger(__name__)

SLICES_PATH = "/apis/discovery.k8s.io/v1/endpointslices"


def _publication_view(pod: JSON) -> tuple[Any, ...]:
    """What of a pod can change its endpoints; other updates (most status writes) change nothing."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    ports = [c.get("ports") for c in spec.get("containers") or []]
    return (
        meta.get("uid"),
        meta.get("labels"),
        meta.get("deletionTimestamp") is not None,
        (meta.get("annotations") or {}).get(ANNOTATION_ROUTE),
        is_ready(pod),
        is_terminal(pod),
        spec.get("hostname"),
        spec.get("subdomain"),
        ports,
    )


class EndpointPublisher:
    def __init__(
        self,
        kube: KubeClient,
        node_name: str,
        *,
        pods: Informer,
        services: Informer,
        max_per_slice: int = 100,
        zone: str | None = None,
        retry: Callable[[], Backoff] = lambda: Backoff(base=0.5, cap=30.0, jitter=0.25),
    ) -> None:
        self._kube = kube
        self._node = node_name
        self._pods = pods
        self._services = services
        self._max = max_per_slice
        self._zone = zone
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_NODE}={node_label_value(node_name)}"
        self.slices = Informer(kube, SLICES_PATH, label_selector=selector, handler=self.on_slice)
        #: Our own writes, as the apiserver answered them, until the informer has caught up with
        #: each (see ``existing``). Starts empty with the publisher (one per leadership term).
        self._written: dict[str, JSON] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._by_namespace: dict[str, set[str]] = {}
        self._backoff: dict[str, Backoff] = {}
        self._retry = retry
        self._timers: set[asyncio.TimerHandle] = set()
        self.writes = 0  #: slice creates, updates and deletes sent (what the bench counts)
        self.reconciles = 0

    # ------------------------------------------------------------------ events (synchronous)

    def on_service(self, kind: str, old: JSON | None, new: JSON) -> None:
        key = object_key(new)
        namespace = new["metadata"].get("namespace", "")
        if kind == "DELETED":
            self._by_namespace.get(namespace, set()).discard(key)
        else:
            self._by_namespace.setdefault(namespace, set()).add(key)
        if old is None or kind == "DELETED" or old.get("spec") != new.get("spec"):
            self.mark(key)

    def on_pod(self, kind: str, old: JSON | None, new: JSON) -> None:
        services = self._by_namespace.get(new["metadata"].get("namespace", ""))
        if not services:
            return  # no Service in the pod's namespace: no slice to touch (most pods, most events)
        if old is not None and kind != "DELETED" and _publication_view(old) == _publication_view(new):
            return
        for key in list(services):
            service = self._services.get(key)
            if service is None:
                continue
            if selects(service, new) or (old is not None and selects(service, old)):
                self.mark(key)

    def on_slice(self, kind: str, old: JSON | None, new: JSON) -> None:
        """A slice of ours changed or went away (our own write, the GC, someone's edit): look at
        its Service again; a write we made finds nothing to do."""
        key = object_key(new)
        written = self._written.get(key)
        if written is not None and not _newer(written, new):
            del self._written[key]  # the cache has caught up with our write (or passed it)
        name = (new["metadata"].get("labels") or {}).get(LABEL_SERVICE_NAME)
        if name:
            self.mark(f"{new['metadata'].get('namespace', '')}/{name}")

    def mark(self, key: str) -> None:
        self._dirty.add(key)
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Reconcile dirty Services until cancelled; start after every informer listed."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.slices.run(), name="endpointslice-informer")
            await self._pods.synced.wait()
            await self._services.synced.wait()
            await self.slices.synced.wait()
            for key, service in list(self._services.cache.items()):
                self._by_namespace.setdefault(service["metadata"].get("namespace", ""), set()).add(key)
                if (service.get("spec") or {}).get("selector"):
                    self.mark(key)
            for found in list(self.slices.cache.values()):
                self.on_slice("ADDED", None, found)  # slices of Services gone while we were away
            try:
                await self._loop()
            finally:
                for timer in self._timers:
                    timer.cancel()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty:
                key = self._dirty.pop()
                try:
                    await self.reconcile(key)
                except KubeError as exc:
                    self._again(key, exc)
                else:
                    self._backoff.pop(key, None)

    def _again(self, key: str, exc: Exception) -> None:
        delay = self._backoff.setdefault(key, self._retry()).next()
        log.warning("endpoints of service %s: %s; retrying in %.1fs", key, exc, delay)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(timer)
            self.mark(key)

        timer = loop.call_later(delay, fire)
        self._timers.add(timer)

    def desired(self, key: str) -> dict[str, JSON]:
        service = self._services.get(key)
        if service is None:
            return {}
        namespace = service["metadata"].get("namespace", "")
        pods = [p for p in self._pods.cache.values() if p["metadata"].get("namespace") == namespace]
        return desired_slices(service, pods, self._node, max_per_slice=self._max, zone=self._zone)

    def existing(self, key: str) -> dict[str, JSON]:
        """The Service's slices as the informer has them, read through our own writes it has not
        seen yet: a reconcile that follows a write at once (the next pod became Ready) compares
        with what it wrote, instead of creating it again or PUTting with the old
        resourceVersion (a 409 and a backed-off retry for the whole batch)."""
        namespace, _, name = key.partition("/")

        def of_service(found: JSON) -> bool:
            meta = found["metadata"]
            return (
                meta.get("namespace") == namespace
                and (meta.get("labels") or {}).get(LABEL_SERVICE_NAME) == name
            )

        have = {object_key(s): s for s in self.slices.cache.values() if of_service(s)}
        for slice_key, written in self._written.items():
            cached = have.get(slice_key)
            if of_service(written) and (cached is None or _newer(written, cached)):
                have[slice_key] = written
        return {s["metadata"]["name"]: s for s in have.values()}

    def endpoints_of(self, uid: str) -> list[JSON] | None:
        """The endpoints of pod ``uid`` in our slices as last read back from the apiserver (the
        drain before a delete waits until they show ``terminating``); None until listed."""
        if not self.slices.synced.is_set():
            return None
        return [
            endpoint
            for found in self.slices.cache.values()
            for endpoint in found.get("endpoints") or []
            if (endpoint.get("targetRef") or {}).get("uid") == uid
        ]

    async def reconcile(self, key: str) -> None:
        """Make the Service's slices equal to the desired ones, writing only differences."""
        self.reconciles += 1
        desired, existing = self.desired(key), self.existing(key)
        for name, want in desired.items():
            have = existing.get(name)
            if have is None:
                await self._create(want)
            elif differs(have, want):
                body = {
                    **want,
                    "metadata": {**want["metadata"], "resourceVersion": have["metadata"]["resourceVersion"]},
                }
                self.writes += 1
                self._remember(await resources.replace_endpoint_slice(self._kube, body))
        for name in existing.keys() - desired.keys():
            self.writes += 1
            namespace = key.partition("/")[0]
            self._written.pop(f"{namespace}/{name}", None)
            await resources.delete_endpoint_slice(self._kube, namespace, name)

    async def _create(self, want: JSON) -> None:
        self.writes += 1
        try:
            self._remember(await resources.create_endpoint_slice(self._kube, want))
        except KubeConflict:
            # Already there (our cache lags our own write, or a previous term's): the informer
            # event that follows marks the Service again and the update path compares.
            log.debug("endpoint slice %s exists already", want["metadata"]["name"])

    def _remember(self, stored: JSON | None) -> None:
        if stored and (stored.get("metadata") or {}).get("resourceVersion"):
            self._written[object_key(stored)] = stored


def _newer(ours: JSON, cached: JSON) -> bool:
    """Whether our written copy is newer than the cached one. resourceVersions are opaque to
    clients in general, but the apiserver's are etcd revisions, and client-go's
    ``MutationCache`` compares them as integers for exactly this purpose; one that does not
    parse is never taken as newer (the informer's copy wins)."""
    try:
        return int(ours["metadata"]["resourceVersion"]) > int(cached["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False
