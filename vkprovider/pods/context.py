"""What every part of a pod's reconcile shares: its collaborators, settings and the verdict type."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.pods.state import PodStates
from vkprovider.pods.tracker import DeploymentTracker
from vkprovider.traffic.config import TrafficConfig
from vkprovider.translate import ObjectSource

TERMINAL = ("Succeeded", "Failed")
#: Annotations the controller writes on the pod (with ``vkprovider.io/images`` and ``/placement``).
ANNOTATION_PROVIDER = "vkprovider.io/provider"
ANNOTATION_OFFER = "vkprovider.io/offer"


#: A pod UID's endpoints in vkprovider's own EndpointSlices as read back from the apiserver
#: (None while that cache has not listed): what the drain before a delete waits on (pods/drain.py).
EndpointLookup = Callable[[str], list[JSON] | None]


@dataclass(frozen=True)
class Requeue:
    after: float = 0.0  #: look again after this many seconds (ignored when ``backoff``)
    backoff: bool = False  #: look again after the key's exponential backoff


@dataclass
class SyncSettings:
    node_name: str
    host_ip: str
    lost_grace_seconds: float = 60.0
    status_poll_seconds: float = 2.0
    #: how long a provider's API may fail before its pods get ProviderReachable=False
    unreachable_grace_seconds: float = 20.0
    #: write the terminated container states before deleting the object, as the kubelet does;
    #: False (default, the Go library's way): only when finalizers keep the object after the
    #: delete, so a graceful deletion is two requests (the Event and the delete)
    status_before_delete: bool = False
    #: external replicas as Service endpoints (``traffic:``); decides what ``podIP`` shows
    traffic: TrafficConfig = field(default_factory=TrafficConfig)

    def publishes(self, provider: str) -> bool:
        """True when vkprovider publishes ``provider``'s replicas itself: their pods show no
        ``podIP`` (the provider-side IP is not routable from the cluster) and carry a route."""
        t = self.traffic
        return t.publish_endpoints and provider not in t.routable_pod_ip_providers


@dataclass
class SyncDeps:
    kube: KubeClient
    providers: Mapping[str, Provider]
    placer: Placer
    tracker: DeploymentTracker
    events: EventRecorder
    objects: ObjectSource
    settings: SyncSettings
    states: PodStates = field(default_factory=PodStates)
    now: Callable[[], float] = time.time  #: wall clock, to compare with API timestamps
    #: None when vkprovider publishes no endpoints (``traffic.publish_endpoints: false``): no drain
    endpoints: EndpointLookup | None = None


def parse_time(value: str | None) -> float | None:
    """Seconds since the epoch of an API timestamp (RFC 3339 in UTC, ``...Z``), None for none.

    ``fromisoformat``, not ``strptime``: read on every deleting pod's sync, and strptime costs
    ~10 us a call (a regular expression and locale tables) against well under 1 us. A value
    without the ``Z`` is refused (ValueError) rather than read as local time."""
    if not value:
        return None
    if not value.endswith("Z"):
        raise ValueError(f"not an RFC 3339 UTC timestamp: {value!r}")
    return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
