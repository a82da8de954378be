"""Draining an external replica before its deployment stops (pure: the decision, not the waiting).

A kubelet sends SIGTERM as soon as a pod is deleted and trusts the container to finish its
in-flight requests within the grace period while the endpoint controllers take it out of
rotation. A provider's delete is usually not a SIGTERM: RunPod, Vast.ai and most GPU clouds stop
the machine, and with it every request it is serving. So for a replica that vkprovider publishes
as a Service endpoint (``vkprovider/traffic/``), the delete is held back until

* the pod's endpoint shows ``terminating`` (``ready=false``; ``serving`` as the pod says) in our
  own EndpointSlices as read back from the apiserver — kube-proxy routes new connections away
  only once it sees that — and
* the pod's grace period is over, capped by ``traffic.drain_max_seconds``: the time a kubelet
  would have given the container to finish.

Everything is derived from the pod object and the slice cache: the apiserver sets
``deletionTimestamp`` to the request time plus ``deletionGracePeriodSeconds``, so the request
time, and with it the end of the drain, survive a restart; nothing is kept in memory. The wait
itself is a delayed requeue in the pod work queue (no task sleeps per pod).

Nothing is delayed when there is nothing to drain: a force delete (grace 0), a pod that is not
Ready (never was, or its deploy failed), a pod with no recorded route (nothing of it can be
published, whatever the slice cache says or whether it has listed), or a pod with no endpoint in
our slices (no Service selects it, or endpoints are not published by vkprovider). Waiting for the slice
change to be observed is bounded too: past ``request time + drain_max_seconds`` the deployment is
stopped whatever the slices say (the apiserver may be unreachable; the deployment still bills).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vkprovider.pods.context import parse_time
from vkprovider.traffic.route import route_of

JSON = dict[str, Any]
#: How soon to look again while our terminating endpoint is not visible yet (it normally is
#: within one slice write and one watch event).
OBSERVE_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class DrainVerdict:
    """``wait`` seconds before the deployment may be stopped (0: stop it now), and why."""

    wait: float
    reason: str
    #: the end of the drain (unix seconds) when one applies, for the Event
    until: float | None = None

    @property
    def stop_now(self) -> bool:
        return self.wait <= 0


def _ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def observed_terminating(endpoints: Sequence[Mapping[str, Any]]) -> bool:
    """Every endpoint of the pod shows ``terminating`` (and with it ``ready=false``, unless the
    Service publishes not-ready addresses, where ready stays true by the user's choice)."""
    return all((e.get("conditions") or {}).get("terminating") for e in endpoints)


def drain_verdict(
    pod: JSON,
    endpoints: Sequence[Mapping[str, Any]] | None,
    *,
    now: float,
    max_seconds: float,
    ended: bool = False,
) -> DrainVerdict:
    """Whether the deployment of the deleting ``pod`` may be stopped yet.

    ``endpoints`` are the pod's endpoints in vkprovider's EndpointSlices as last read from the
    apiserver (the slice informer), or None while that cache has not listed yet; ``ended``: the
    provider already reports the deployment terminal (it serves nothing whatever the pod says).
    """
    meta = pod["metadata"]
    grace = meta.get("deletionGracePeriodSeconds")
    deadline = parse_time(meta.get("deletionTimestamp"))
    if deadline is None or not grace or grace <= 0:
        return DrainVerdict(0.0, "force delete (grace period 0): no drain")
    if max_seconds <= 0:
        return DrainVerdict(0.0, "draining disabled (traffic.drain_max_seconds is 0)")
    if ended:
        return DrainVerdict(0.0, "the deployment already ended: nothing to drain")
    if not _ready(pod):
        return DrainVerdict(0.0, "the pod is not Ready: it serves no traffic to drain")
    route = route_of(pod)
    if route is None or not route.endpoints.addresses:
        return DrainVerdict(0.0, "the pod has no route: nothing of it is published")
    if endpoints is not None and not endpoints:
        return DrainVerdict(0.0, "no endpoint of the pod is published: nothing to drain")
    requested = deadline - float(grace)  # the apiserver: deletionTimestamp = request + grace
    until = requested + min(float(grace), max_seconds)
    bound = requested + max_seconds
    if now >= bound:
        return DrainVerdict(0.0, f"drain cap of {max_seconds:g}s reached", until)
    if endpoints is None or not observed_terminating(endpoints):
        wait = min(OBSERVE_POLL_SECONDS, bound - now)
        return DrainVerdict(wait, "waiting for the terminating endpoint to be observed", until)
    if now >= until:
        return DrainVerdict(0.0, "drained: endpoint terminating and grace period over", until)
    return DrainVerdict(until - now, "draining: endpoint terminating, grace period running", until)
