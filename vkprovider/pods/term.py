"""The state of one run of the pod controller: one leadership term, or one supervised restart.

Everything that describes the world as last seen lives here — the pod and service caches, the
provider tracker, the work queue, the per-pod sync state, the UID index — and a new ``Term`` is
built for every run, so a replica that regains leadership starts from a fresh list instead of
trusting caches (and ``synced`` flags) from a term in which another replica acted meanwhile.
The Placer's per-pod book (placements, budget shares, spread slots, open creates) starts empty
with each term too (``Placer.begin_term``) and is rebuilt by adoption (``pods/resume.py``).
Nothing here does I/O until ``PodController.run`` starts its loops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.informer import Informer, object_key
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.pods.objects import ApiObjectSource
from vkprovider.pods.queue import RetryBudget, WorkQueue
from vkprovider.pods.sync import PodSync, SyncSettings, is_relevant_change
from vkprovider.pods.tracker import DeploymentTracker
from vkprovider.traffic.config import TrafficConfig
from vkprovider.traffic.publisher import EndpointPublisher


@dataclass(frozen=True)
class TermSettings:
    node_name: str
    host_ip: str
    status_poll_seconds: float
    watch_resync_seconds: float
    lost_grace_seconds: float
    backoff_base_seconds: float
    backoff_max_seconds: float
    queue_rate: float  #: retries per second, overall (a key's own backoff applies too)
    status_before_delete: bool = False
    traffic: TrafficConfig = field(default_factory=TrafficConfig)
    zone: str | None = None  #: the virtual node's topology zone, written on published endpoints


class Term:
    def __init__(
        self,
        number: int,
        kube: KubeClient,
        providers: Mapping[str, Provider],
        placer: Placer,
        events: EventRecorder,
        settings: TermSettings,
    ) -> None:
        self.number = number
        placer.begin_term()  # per-pod placement state is this term's: rebuilt by adoption
        self.queue = WorkQueue(
            base_delay=settings.backoff_base_seconds,
            max_delay=settings.backoff_max_seconds,
            retries=RetryBudget(settings.queue_rate, max(1, int(settings.queue_rate))),
        )
        #: UID -> pod key for the pods in the cache (pruned with the cache)
        self.uid_keys: dict[str, str] = {}
        self.informer = Informer(
            kube,
            "/api/v1/pods",
            field_selector=f"spec.nodeName={settings.node_name}",
            handler=self._on_pod,
        )
        self.services = Informer(kube, "/api/v1/services", handler=self._on_service)
        #: external replicas as Service endpoints (``traffic.publish_endpoints``); this term's own
        self.publisher = (
            EndpointPublisher(
                kube,
                settings.node_name,
                pods=self.informer,
                services=self.services,
                max_per_slice=settings.traffic.max_endpoints_per_slice,
                zone=settings.zone,
            )
            if settings.traffic.publish_endpoints
            else None
        )
        self.tracker = DeploymentTracker(
            providers,
            settings.node_name,
            interval=settings.status_poll_seconds,
            watch_resync=settings.watch_resync_seconds,
            on_change=self._on_deployment,
            on_status=placer.observe,
        )
        self.sync = PodSync(
            kube,
            providers,
            placer,
            self.tracker,
            events,
            ApiObjectSource(kube, self.services),
            SyncSettings(
                node_name=settings.node_name,
                host_ip=settings.host_ip,
                lost_grace_seconds=settings.lost_grace_seconds,
                status_poll_seconds=settings.status_poll_seconds,
                status_before_delete=settings.status_before_delete,
                traffic=settings.traffic,
            ),
            endpoints=self.publisher.endpoints_of if self.publisher is not None else None,
        )
        #: set once this term's informers listed and its tracker polled every provider
        self.synced = False

    def _on_service(self, kind: str, old: JSON | None, new: JSON) -> None:
        if self.publisher is not None:
            self.publisher.on_service(kind, old, new)

    def _on_pod(self, kind: str, old: JSON | None, new: JSON) -> None:
        if self.publisher is not None:
            self.publisher.on_pod(kind, old, new)
        key = object_key(new)
        uid = new["metadata"]["uid"]
        previous = (old or {}).get("metadata", {}).get("uid")
        if previous and previous != uid and self.uid_keys.get(previous) == key:
            del self.uid_keys[previous]  # same name, new pod (a deletion we never saw)
        if kind == "DELETED":
            if self.uid_keys.get(uid) == key:
                del self.uid_keys[uid]
            self.queue.add(key)
            return
        self.uid_keys[uid] = key
        if kind == "ADDED" or is_relevant_change(old, new):
            self.queue.add(key)

    def _on_deployment(self, uid: str) -> None:
        key = self.uid_keys.get(uid)
        if key is not None:
            self.queue.add(key)
