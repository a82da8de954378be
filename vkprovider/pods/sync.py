"""Reconcile one pod: the decisions of the pod controller, one function per situation.

``PodSync.sync(key, pod)`` is called by exactly one worker at a time per key. It returns a
``Requeue`` telling the controller when to look again (None: only on the next event). Errors
carry behaviour: ``InvalidRequest`` fails the pod, ``Unschedulable`` keeps it Pending with a
reason, a missing ConfigMap/Secret keeps it Pending (``CreateContainerConfigError``) and is
retried, ``Transient`` retries with backoff and never changes what the pod shows.

Per-pod memory lives in ``PodStates`` (``pods/state.py``), deletion in ``pods/deletion.py``,
status writes in ``pods/writer.py``, in-place updates in ``pods/update.py``, reading a pod object
in ``pods/podview.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from vkprovider.errors import InvalidRequest, ProviderError, Unschedulable
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.kube.informer import object_key
from vkprovider.logs import pod_action
from vkprovider.metrics import observe_deployed
from vkprovider.models import ContainerState, Phase
from vkprovider.placement import NotPlaced, Placer
from vkprovider.placement.explain import ANNOTATION_KEY, annotation_value, event_message
from vkprovider.plugins.api import Provider
from vkprovider.pods import reasons
from vkprovider.pods.context import (
    ANNOTATION_OFFER,
    ANNOTATION_PROVIDER,
    TERMINAL,
    EndpointLookup,
    Requeue,
    SyncDeps,
    SyncSettings,
    parse_time,
)
from vkprovider.pods.deletion import Deletion
from vkprovider.pods.podview import is_relevant_change, placement_context, pod_once_ran
from vkprovider.pods.resume import Resume, restart_done, restart_intent
from vkprovider.pods.route import Routes
from vkprovider.pods.state import PodRecord, PodStates
from vkprovider.pods.tracker import DeploymentTracker, Tracked
from vkprovider.pods.update import ANNOTATION_IMAGES, InPlaceUpdate, images_of, spec_changed
from vkprovider.pods.writer import StatusWriter
from vkprovider.translate import MissingReference, ObjectSource, translate_pod

log = logging.getLogger(__name__)

#: Placement warnings that mean "this candidate refused, the next one was tried".
FAILOVER_REASONS = frozenset(
    {"ProviderNoCapacity", "ProviderCreateFailed", "ProviderDisabled", "ProviderRefused"}
)

#: The kubelet's waiting reason for a container whose ConfigMap/Secret reference cannot be resolved.
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"


class PodSync:
    def __init__(
        self,
        kube: KubeClient,
        providers: Mapping[str, Provider],
        placer: Placer,
        tracker: DeploymentTracker,
        events: EventRecorder,
        objects: ObjectSource,
        settings: SyncSettings,
        *,
        wall_clock: Callable[[], float] = time.time,
        endpoints: EndpointLookup | None = None,
    ) -> None:
        self.kube = kube
        self.providers = providers
        self.placer = placer
        self.tracker = tracker
        self.events = events
        self.objects = objects
        self.settings = settings
        self.states = PodStates()
        self._deps = SyncDeps(
            kube, providers, placer, tracker, events, objects, settings, self.states, wall_clock, endpoints
        )
        self._now = wall_clock
        self.writer = StatusWriter(self._deps)
        self.deletion = Deletion(self._deps, self.writer)
        self.updates = InPlaceUpdate(self._deps, self.writer)
        self.resume = Resume(self._deps)  #: what an earlier term left (pods/resume.py)
        self.routes = Routes(self._deps, events)  #: how a running replica is reached (pods/route.py)

    @property
    def known_uids(self) -> dict[str, str]:
        """``key -> uid`` of the pods handled here (compatibility; prefer ``states.uids()``)."""
        return self.states.current_uids()

    def key_of(self, uid: str) -> str | None:
        return self.states.key_of(uid)

    # ------------------------------------------------------------------ entry point

    async def sync(self, key: str, pod: JSON | None) -> Requeue | None:
        # Records of this key whose object is gone (deleted, or replaced by a same-named pod):
        # their deployments go first; a failure raises and the key is retried with backoff.
        await self.deletion.reap(key, pod["metadata"]["uid"] if pod is not None else None)
        if pod is None:
            return None
        uid = pod["metadata"]["uid"]
        record, first_sight = self.states.observe(uid, key)
        if first_sight:
            self.resume.first_sight(pod, record)
        if (pod.get("status") or {}).get("phase") not in TERMINAL:
            self.resume.adopt(pod, record)  # any tracked deployment placement does not know yet
        if pod["metadata"].get("deletionTimestamp"):
            return await self.deletion.deleting(pod, record)
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            return await self.deletion.cleanup_terminal(record)
        tracked = self.tracker.get(uid)
        if tracked is None:
            tracked = await self._find_existing(pod)
        if tracked is None:
            tracked = await self.resume.find_unlisted(pod, record)
        if tracked is None:
            return await self._create(pod, record)
        self.resume.live(pod, record, tracked)
        return await self._reflect(pod, record, tracked)

    # ------------------------------------------------------------------ adoption

    async def _find_existing(self, pod: JSON) -> Tracked | None:
        """Ask the provider the pod says it is on (restart resync) before deploying anew."""
        name = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_PROVIDER)
        provider = self.providers.get(name or "")
        if provider is None or name is None:
            return None
        uid = pod["metadata"]["uid"]
        try:
            status = await provider.get(uid)
        except ProviderError as exc:
            if exc.code == "NotFound":
                return None
            raise
        self.tracker.record(uid, name, status)
        self.placer.adopt(
            uid, placement_context(pod), name, offer_id=status.offer_id, price_per_hour=status.price_per_hour
        )
        return self.tracker.get(uid)

    # ------------------------------------------------------------------ creation

    async def _create(self, pod: JSON, record: PodRecord) -> Requeue | None:
        if pod_once_ran(pod) and not record.restarting:
            # It ran, and no provider knows it any more: lost while we were away.
            return await self._fail(
                pod, record, reasons.PROVIDER_LOST, "the deployment backing this pod no longer exists"
            )
        try:
            translation = await translate_pod(pod, node_name=self.settings.node_name, source=self.objects)
        except MissingReference as exc:
            # Like the kubelet: Pending, containers waiting, retried until the object exists.
            await self.events.pod(pod, "Warning", exc.reason, exc.message)
            await self.writer.pending(pod, "", "", waiting=(CREATE_CONTAINER_CONFIG_ERROR, exc.message))
            return Requeue(backoff=True)
        except InvalidRequest as exc:
            return await self._fail(pod, record, exc.reason, exc.message)
        for warning in translation.warnings:
            await self.events.pod(pod, "Warning", warning.reason, warning.message)
        try:
            placement = await self.placer.deploy(translation.request, placement_context(pod))
        except InvalidRequest as exc:
            pod_action(
                log, "deploy", "invalid", pod=object_key(pod), uid=pod["metadata"]["uid"], error=str(exc)
            )
            await self.events.pod(pod, "Warning", reasons.PROVIDER_CREATE_FAILED, str(exc))
            return await self._fail(
                pod,
                record,
                exc.reason if exc.reason != "InvalidRequest" else reasons.PROVIDER_FAILED,
                str(exc),
            )
        except NotPlaced as exc:
            pod_action(
                log, "deploy", exc.reason, pod=object_key(pod), uid=pod["metadata"]["uid"], error=exc.message
            )
            for reason, message in exc.warnings:
                await self.events.pod(pod, "Warning", reason, message)
            await self.events.pod(pod, "Warning", exc.reason, exc.message)
            decision = {ANNOTATION_KEY: annotation_value(exc.decision)}
            await self.writer.pending(pod, exc.reason, exc.message, annotations=decision)
            return Requeue(backoff=True)
        except Unschedulable as exc:
            await self.events.pod(pod, "Warning", exc.reason, exc.message)
            await self.writer.pending(pod, exc.reason, exc.message)
            return Requeue(backoff=True)
        uid = pod["metadata"]["uid"]
        for reason, message in placement.warnings:
            if reason in FAILOVER_REASONS:
                pod_action(log, "failover", reason, pod=object_key(pod), uid=uid, error=message)
            await self.events.pod(pod, "Warning", reason, message)
        pod_action(
            log,
            "deploy",
            "ok",
            pod=object_key(pod),
            uid=uid,
            provider=placement.provider,
            offer=placement.offer.offer_id,
            price_per_hour=placement.offer.price_per_hour,
        )
        if not record.deployed:  # the first deployment only: redeploys are not a bind's lag
            record.deployed = True
            observe_deployed(pod, placement.provider)
        if not placement.status.phase.terminal:
            # A terminal answer is the exit being restarted, still there (an asynchronous delete,
            # a deploy idempotent on the UID): the restart is not done, and not to be counted again.
            record.restarting = False
        record.deployment_deleted = False
        self.tracker.record(uid, placement.provider, placement.status)
        await self.events.pod(
            pod,
            "Normal",
            reasons.PROVIDER_CREATE_SUCCESS,
            f"deployed on {placement.provider} offer {placement.offer.offer_id} "
            f"({placement.offer.gpu_type}, {placement.offer.region or 'any region'}, "
            f"{placement.offer.price_per_hour:.2f}/h): {event_message(placement.decision)}",
        )
        # Written with the first status (one request), or on their own if no status write follows.
        record.annotations = {
            ANNOTATION_PROVIDER: placement.provider,
            ANNOTATION_OFFER: placement.offer.offer_id,
            ANNOTATION_IMAGES: images_of(pod),
            ANNOTATION_KEY: annotation_value(placement.decision),
            **restart_done(pod),  # the restart intent, if any, is honoured
        }
        tracked = self.tracker.get(uid)
        assert tracked is not None
        return await self._reflect(pod, record, tracked)

    # ------------------------------------------------------------------ status

    async def _reflect(self, pod: JSON, record: PodRecord, tracked: Tracked) -> Requeue | None:
        """Write the provider's truth onto the pod; decide on lost/failed/restart."""
        status = tracked.status
        since = self.tracker.unreachable_since(tracked.provider)
        plain = (
            since is None
            and not record.unreachable_reported
            and tracked.missing_since is None
            and status.phase is not Phase.UNKNOWN
            and not status.phase.terminal
            and not spec_changed(pod)
        )
        if record.annotations and not plain:
            # Not the one plain status write that would carry them: put them on the pod first.
            pod = await self.writer.annotate(pod, record.annotations)
            record.annotations = None
        if since is not None and not status.phase.terminal:
            return await self._unreachable(pod, record, tracked, since)
        if record.unreachable_reported:
            record.unreachable_reported = False
            await self.events.pod(
                pod, "Normal", "ProviderReachable", f"provider {tracked.provider} answers again"
            )
        if tracked.missing_since is not None or status.phase is Phase.UNKNOWN:
            return await self._maybe_lost(pod, record, tracked)
        if status.phase.terminal:
            return await self._terminal(pod, record, tracked)
        if spec_changed(pod):
            await self.updates.apply(pod, record, tracked)
        route = await self.routes.verdict(pod, record, tracked)
        annotations = {**(record.annotations or {}), **(route.annotations if route else {})}
        await self.writer.write(
            pod,
            status,
            tracked.provider,
            restarts=record.restarts,
            annotations=annotations or None,
            route=route.condition if route else None,
        )
        record.annotations = None
        return None

    async def _unreachable(
        self, pod: JSON, record: PodRecord, tracked: Tracked, since: float
    ) -> Requeue | None:
        """The provider's API is down: keep the last observed status, never call it lost.

        After a short grace the pod gets ``vkprovider.io/ProviderReachable=False`` and one Event.
        The tracker re-queues every pod of a provider whose API goes away or comes back, which
        is how this runs and how the condition clears; nothing polls per pod.
        """
        settings = self.settings
        elapsed = self.tracker.clock() - since
        if elapsed < settings.unreachable_grace_seconds:
            return Requeue(
                after=max(settings.status_poll_seconds, settings.unreachable_grace_seconds - elapsed)
            )
        await self.writer.write(
            pod, tracked.status, tracked.provider, restarts=record.restarts, reachable=False
        )
        if not record.unreachable_reported:
            record.unreachable_reported = True
            await self.events.pod(
                pod,
                "Warning",
                "ProviderUnreachable",
                f"the API of provider {tracked.provider} has not answered for {elapsed:.0f}s; "
                "the pod keeps its last observed status",
            )
        return None

    async def _maybe_lost(self, pod: JSON, record: PodRecord, tracked: Tracked) -> Requeue | None:
        """Lost means missing from (or Unknown to) a reachable provider *continuously* for
        ``lost_grace_seconds``, and then confirmed by a direct ``get`` answering NotFound (or
        Unknown still): one list that omits a live deployment, or one Unknown, kills nothing.

        The clock is the tracker's (``missing_since``/``unknown_since``, reset by any healthy
        sighting), never the time the deployment was first seen; a pod that never ran also gets
        the grace from its creation (a slow provisioning is not a loss).
        """
        grace = self.settings.lost_grace_seconds
        missing = tracked.missing_since is not None
        since = tracked.missing_since if missing else tracked.unknown_since
        now = self.tracker.clock()
        elapsed = now - (since if since is not None else now)
        age = self._now() - (parse_time(pod["metadata"].get("creationTimestamp")) or self._now())
        never_ran = not tracked.ever_ran and not pod_once_ran(pod)
        wait = grace - elapsed
        if never_ran:
            wait = max(wait, grace - age)
        if wait > 0:
            return Requeue(after=max(self.settings.status_poll_seconds, wait))
        confirmed = await self._confirm_lost(pod["metadata"]["uid"], tracked, unknown=not missing)
        if confirmed is None:
            return Requeue(backoff=True)  # the provider did not answer: ask again, change nothing
        fresh = self.tracker.get(pod["metadata"]["uid"])
        if not confirmed and fresh is not None:
            return await self._reflect(pod, record, fresh)  # there after all: show what get said
        what = "vanished from" if missing else "is unknown to"
        return await self._fail(
            pod,
            record,
            reasons.PROVIDER_LOST,
            f"the deployment {what} provider {tracked.provider} for over {grace:g}s",
        )

    async def _confirm_lost(self, uid: str, tracked: Tracked, *, unknown: bool) -> bool | None:
        """Ask the provider directly. True: NotFound, or (``unknown``: timed from Unknown
        reports) Unknown still; False: it answered otherwise (recorded, which resets the
        tracker's clocks, so a missing deployment that is Unknown starts the Unknown clock only
        now); None: no answer."""
        provider = self.providers.get(tracked.provider)
        if provider is None:
            return True
        try:
            status = await provider.get(uid)
        except ProviderError as exc:
            if exc.code == "NotFound":
                return True
            log.info("confirming that %s is lost on %s failed: %s", uid, tracked.provider, exc)
            return None
        self.tracker.record(uid, tracked.provider, status)
        return unknown and status.phase is Phase.UNKNOWN

    async def _terminal(self, pod: JSON, record: PodRecord, tracked: Tracked) -> Requeue | None:
        """Honour restartPolicy for a finished deployment, like the kubelet does for containers."""
        status, uid = tracked.status, pod["metadata"]["uid"]
        policy = pod["spec"].get("restartPolicy", "Always")
        exit_codes = [c.exit_code for c in status.containers if c.state is ContainerState.TERMINATED]
        app_failed = any(code not in (None, 0) for code in exit_codes)
        # A failure the provider names (GPU fault, preemption, ...) is the provider giving up:
        # fail the pod so its controller replaces it. A plain container exit honours restartPolicy.
        infra_failure = status.phase is Phase.FAILED and (
            not app_failed or status.reason not in reasons.CONTAINER_EXIT_REASONS
        )
        restart = not infra_failure and (
            policy == "Always" or (policy == "OnFailure" and status.phase is Phase.FAILED)
        )
        if restart and record.restarting:  # the same exit seen again (delete in flight): counted once
            return await self._restart_in_flight(pod, record)
        if restart:
            record.restarts += 1
            record.restarting = True
            # The intent goes on the pod before the delete: a next term redeploys, not ProviderLost.
            await self.writer.write(
                pod,
                status,
                tracked.provider,
                restarts=record.restarts,
                phase="Running",
                annotations=restart_intent(record.restarts),
            )
            await self.deletion.delete_deployment(uid, keep_placement=True)
            pod_action(log, "restart", policy, pod=object_key(pod), uid=uid, provider=tracked.provider)
            await self.events.pod(pod, "Normal", "Restarting", f"container exited; restartPolicy {policy}")
            return Requeue(backoff=True)
        if status.phase is Phase.SUCCEEDED:
            await self.writer.write(pod, status, tracked.provider, phase="Succeeded")
        else:
            reason = status.reason or reasons.PROVIDER_FAILED
            message = status.message or f"the deployment failed on provider {tracked.provider}"
            await self.events.pod(pod, "Warning", reason, message)
            await self.writer.write(
                pod, status, tracked.provider, phase="Failed", reason=reason, message=message
            )
        return await self.deletion.cleanup_terminal(record)

    async def _restart_in_flight(self, pod: JSON, record: PodRecord) -> Requeue | None:
        """The exit being restarted is still listed: its delete is in flight (an asynchronous
        provider, a remote Kubernetes). It was counted once, when first seen; the delete is
        repeated (idempotent), nothing is counted, and the redeploy waits for it to be gone."""
        uid = pod["metadata"]["uid"]
        await self.deletion.delete_deployment(uid, keep_placement=True)
        return Requeue(after=self.settings.status_poll_seconds)

    async def _fail(self, pod: JSON, record: PodRecord, reason: str, message: str) -> Requeue | None:
        await self.events.pod(pod, "Warning", reason, message)
        uid = pod["metadata"]["uid"]
        tracked = self.tracker.get(uid)
        await self.writer.write(
            pod,
            tracked.status if tracked else None,
            tracked.provider if tracked else "none",
            phase="Failed",
            reason=reason,
            message=message,
        )
        return await self.deletion.cleanup_terminal(record)


__all__ = [
    "ANNOTATION_OFFER",
    "ANNOTATION_PROVIDER",
    "PodSync",
    "Requeue",
    "SyncSettings",
    "is_relevant_change",
]
