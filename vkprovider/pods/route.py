"""How a running external replica is reached: asked of its provider once, recorded on the pod.

When a deployment runs, the provider's ``endpoints`` (capability ``endpoints``) says at which
address and ports clients reach it; the answer goes onto the pod as the annotation
``vkprovider.io/endpoints`` in the same status patch that shows the pod Running, with the
condition ``vkprovider.io/ServiceRoute``. The EndpointSlice publisher (``vkprovider/traffic``)
reads only the pod. A provider that offers no route (no capability, or no address) leaves the
replica unpublished, and the pod says so: the condition is False with reason ``NoRoute`` and a
Warning Event ``NoRoute`` is recorded once for a pod that declares container ports (a pod that
declares none — a batch job — serves nothing and gets the condition only).

The provider is asked once per deployment (the record remembers which deployment id it asked
for), again only after a redeploy, never per Service, per reconcile or on a timer; not at all
when its status carries the answer (``DeploymentStatus.endpoints``, one call per pod less). A
failed call changes nothing and is asked again on the pod's next status change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from vkprovider.errors import ProviderError
from vkprovider.kube.client import JSON
from vkprovider.kube.events import EventRecorder
from vkprovider.models import DeploymentEndpoints, Phase
from vkprovider.plugins.api import Provider, SupportsEndpoints
from vkprovider.pods.context import SyncDeps
from vkprovider.pods.state import PodRecord
from vkprovider.pods.tracker import Tracked
from vkprovider.traffic.route import ANNOTATION_ROUTE, CONDITION_ROUTE, NO_ROUTE, ROUTED, Route, route_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouteVerdict:
    """What the next status write shows: the condition, and the annotation if it changes."""

    condition: tuple[bool, str, str]
    annotations: dict[str, str]


def _declares_ports(pod: JSON) -> bool:
    return any(c.get("ports") for c in (pod.get("spec") or {}).get("containers") or [])


def _shows_no_route(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == CONDITION_ROUTE and c.get("reason") == NO_ROUTE for c in conditions)


class Routes:
    def __init__(self, deps: SyncDeps, events: EventRecorder) -> None:
        self._deps = deps
        self._events = events
        #: provider name -> (the provider object asked, its endpoints source or None)
        self._capable: dict[str, tuple[Provider, SupportsEndpoints | None]] = {}

    async def _endpoints_source(self, name: str) -> SupportsEndpoints | None:
        provider: Provider | None = self._deps.providers.get(name)
        if provider is None:
            return None
        known = self._capable.get(name)
        if known is not None and known[0] is provider:
            return known[1]
        # Asked once per provider object: capabilities never change during a plugin's life (the
        # proto says so), and a Protocol isinstance check costs more than the rest of a verdict.
        source: SupportsEndpoints | None = None
        if isinstance(provider, SupportsEndpoints) and (await provider.info()).capabilities.endpoints:
            source = provider
        self._capable[name] = (provider, source)
        return source

    async def verdict(self, pod: JSON, record: PodRecord, tracked: Tracked) -> RouteVerdict | None:
        """The route to show with this status write; None: leave annotation and condition as
        they are (publishing off for this provider, not running yet, or already decided)."""
        status = tracked.status
        if not self._deps.settings.publishes(tracked.provider) or status.phase is not Phase.RUNNING:
            return None
        deployment = (tracked.provider, status.provider_id)
        current = route_of(pod)
        if (
            current is not None
            and (current.provider, current.deployment) == deployment
            and current.endpoints.addresses
        ):
            return RouteVerdict((True, ROUTED, f"published at {current.describe()}"), {})
        if record.route_asked == deployment:
            return None  # asked for this deployment already: the pod shows the answer
        endpoints = status.endpoints  # carried with the status: no call
        if endpoints is None:
            source = await self._endpoints_source(tracked.provider)
            if source is None:
                record.route_asked = deployment
                return await self._no_route(
                    pod,
                    tracked,
                    f"provider {tracked.provider} offers no route to its deployments (no endpoints capability)",
                )
            try:
                endpoints = await source.endpoints(pod["metadata"]["uid"])
            except ProviderError as exc:
                log.info(
                    "route of %s on %s: %s (asked again on its next change)",
                    record.key,
                    tracked.provider,
                    exc,
                )
                return None
        record.route_asked = deployment
        if not endpoints.addresses:
            return await self._no_route(
                pod, tracked, f"provider {tracked.provider} reports no address for this deployment"
            )
        route = Route(tracked.provider, status.provider_id, endpoints)
        return RouteVerdict(
            (True, ROUTED, f"published at {route.describe()}"), {ANNOTATION_ROUTE: route.dump()}
        )

    async def _no_route(self, pod: JSON, tracked: Tracked, why: str) -> RouteVerdict:
        message = f"{why}: this replica is not published as an endpoint of any Service"
        if _declares_ports(pod) and not _shows_no_route(pod):
            await self._events.pod(pod, "Warning", NO_ROUTE, message)
        # An empty route replaces one a previous deployment recorded, so nothing stale is published.
        empty = Route(
            tracked.provider, tracked.status.provider_id, DeploymentEndpoints(uid=pod["metadata"]["uid"])
        )
        annotations = {ANNOTATION_ROUTE: empty.dump()} if route_of(pod) is not None else {}
        return RouteVerdict((False, NO_ROUTE, message), annotations)
