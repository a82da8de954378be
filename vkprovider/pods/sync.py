"""Reconcile one pod: the decisions of the pod controller, one function per situation.

``PodSync.sync(key)`` is called by exactly one worker at a time per key. It returns a
``Requeue`` telling the controller when to look again (None: only on the next event). Errors
carry behaviour: ``InvalidRequest`` fails the pod, ``Unschedulable`` keeps it Pending with a
reason, ``Transient`` retries with backoff and never changes what the pod shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from vkprovider.errors import InvalidRequest, ProviderError, Unschedulable
from vkprovider.kube import resources
from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeError, KubeNotFound
from vkprovider.kube.events import EventRecorder
from vkprovider.models import ContainerState, DeploymentStatus, Phase
from vkprovider.placement import NotPlaced, Placer, PodContext
from vkprovider.placement.explain import ANNOTATION_KEY, annotation_value, event_message
from vkprovider.plugins.api import Provider
from vkprovider.pods import reasons
from vkprovider.pods.status import build_status, needs_write
from vkprovider.pods.tracker import DeploymentTracker, Tracked
from vkprovider.pods.update import ANNOTATION_IMAGES, images_of, spec_changed
from vkprovider.translate import ObjectSource, translate_pod

log = logging.getLogger(__name__)

ANNOTATION_PROVIDER = "vkprovider.io/provider"
ANNOTATION_OFFER = "vkprovider.io/offer"
TERMINAL = ("Succeeded", "Failed")


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


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


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
    ) -> None:
        self.kube = kube
        self.providers = providers
        self.placer = placer
        self.tracker = tracker
        self.events = events
        self.objects = objects
        self.settings = settings
        self._now = wall_clock
        self.known_uids: dict[str, str] = {}  #: pod key -> UID, to clean up after the pod vanishes
        self.restarts: dict[str, int] = {}
        self._cleaned: set[str] = set()
        self._restarting: set[str] = set()  #: deleted on purpose to honour restartPolicy
        self._update_reported: set[tuple[str, str]] = set()  #: (uid, images) already reported

    # ------------------------------------------------------------------ entry point

    async def sync(self, key: str, pod: JSON | None) -> Requeue | None:
        if pod is None:
            await self._vanished(key)
            return None
        uid = pod["metadata"]["uid"]
        previous = self.known_uids.get(key)
        if previous is not None and previous != uid:
            await self._delete_deployment(previous)  # same name, new pod: the old one is gone
        self.known_uids[key] = uid
        if pod["metadata"].get("deletionTimestamp"):
            return await self._deleting(pod)
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            await self._cleanup_terminal(uid)
            return None
        tracked = self.tracker.get(uid)
        if tracked is None:
            tracked = await self._find_existing(pod)
        if tracked is None:
            return await self._create(pod)
        return await self._reflect(pod, tracked)

    # ------------------------------------------------------------------ creation

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
            uid, self._context(pod), name, offer_id=status.offer_id, price_per_hour=status.price_per_hour
        )
        return self.tracker.get(uid)

    def _context(self, pod: JSON, current: str | None = None) -> PodContext:
        meta = pod["metadata"]
        owners = meta.get("ownerReferences") or []
        workload = next((o["uid"] for o in owners if o.get("controller")), None)
        return PodContext(
            namespace=meta["namespace"],
            annotations=dict(meta.get("annotations") or {}),
            workload=workload,
            current_provider=current,
        )

    async def _create(self, pod: JSON) -> Requeue | None:
        meta = pod["metadata"]
        if self._pod_once_ran(pod) and meta["uid"] not in self._restarting:
            # It ran, and no provider knows it any more: lost while we were away.
            return await self._fail(
                pod, reasons.PROVIDER_LOST, "the deployment backing this pod no longer exists"
            )
        try:
            translation = await translate_pod(pod, node_name=self.settings.node_name, source=self.objects)
        except InvalidRequest as exc:
            return await self._fail(pod, exc.reason, exc.message)
        for warning in translation.warnings:
            await self.events.pod(pod, "Warning", warning.reason, warning.message)
        try:
            placement = await self.placer.deploy(translation.request, self._context(pod))
        except InvalidRequest as exc:
            await self.events.pod(pod, "Warning", reasons.PROVIDER_CREATE_FAILED, str(exc))
            return await self._fail(
                pod, exc.reason if exc.reason != "InvalidRequest" else reasons.PROVIDER_FAILED, str(exc)
            )
        except NotPlaced as exc:
            for reason, message in exc.warnings:
                await self.events.pod(pod, "Warning", reason, message)
            await self.events.pod(pod, "Warning", exc.reason, exc.message)
            await self._annotate(pod, {ANNOTATION_KEY: annotation_value(exc.decision)})
            await self._write_pending(pod, exc.reason, exc.message)
            return Requeue(backoff=True)
        except Unschedulable as exc:
            await self.events.pod(pod, "Warning", exc.reason, exc.message)
            await self._write_pending(pod, exc.reason, exc.message)
            return Requeue(backoff=True)
        for reason, message in placement.warnings:
            await self.events.pod(pod, "Warning", reason, message)
        uid = meta["uid"]
        self._restarting.discard(uid)
        self.tracker.record(uid, placement.provider, placement.status)
        await self.events.pod(
            pod,
            "Normal",
            reasons.PROVIDER_CREATE_SUCCESS,
            f"deployed on {placement.provider} offer {placement.offer.offer_id} "
            f"({placement.offer.gpu_type}, {placement.offer.region or 'any region'}, "
            f"{placement.offer.price_per_hour:.2f}/h): {event_message(placement.decision)}",
        )
        await self._annotate(
            pod,
            {
                ANNOTATION_PROVIDER: placement.provider,
                ANNOTATION_OFFER: placement.offer.offer_id,
                ANNOTATION_IMAGES: images_of(pod),
                ANNOTATION_KEY: annotation_value(placement.decision),
            },
        )
        tracked = self.tracker.get(uid)
        assert tracked is not None
        return await self._reflect(pod, tracked)

    # ------------------------------------------------------------------ status

    async def _reflect(self, pod: JSON, tracked: Tracked) -> Requeue | None:
        """Write the provider's truth onto the pod; decide on lost/failed/restart."""
        status = tracked.status
        uid = pod["metadata"]["uid"]
        if tracked.missing_since is not None or status.phase is Phase.UNKNOWN:
            return await self._maybe_lost(pod, tracked)
        if status.phase.terminal:
            return await self._terminal(pod, tracked)
        if spec_changed(pod):
            await self._update(pod, tracked)
        await self._write(pod, status, tracked.provider, restarts=self.restarts.get(uid, 0))
        return None

    async def _update(self, pod: JSON, tracked: Tracked) -> None:
        """Apply a changed spec in place if the provider can; otherwise say so once, loudly."""
        provider = self.providers.get(tracked.provider)
        if provider is None:
            return
        info = await provider.info()
        if not info.capabilities.update_in_place:
            wanted = (pod["metadata"]["uid"], images_of(pod))
            if wanted in self._update_reported:
                return
            self._update_reported.add(wanted)
            await self.events.pod(
                pod,
                "Warning",
                reasons.PROVIDER_UPDATE_FAILED,
                f"provider {tracked.provider} cannot update a deployment in place; the running "
                f"deployment keeps {(pod['metadata'].get('annotations') or {}).get(ANNOTATION_IMAGES)}. "
                "Delete the pod (or roll its Deployment) to apply the new spec.",
            )
            return
        translation = await translate_pod(pod, node_name=self.settings.node_name, source=self.objects)
        request = translation.request.model_copy(update={"offer_id": tracked.status.offer_id or None})
        try:
            status = await provider.deploy(request)
        except ProviderError as exc:
            await self.events.pod(pod, "Warning", reasons.PROVIDER_UPDATE_FAILED, str(exc))
            raise
        self.tracker.record(pod["metadata"]["uid"], tracked.provider, status)
        await self.events.pod(
            pod, "Normal", reasons.PROVIDER_UPDATE_SUCCESS, f"updated in place on {tracked.provider}"
        )
        await self._annotate(pod, {ANNOTATION_IMAGES: images_of(pod)})

    async def _maybe_lost(self, pod: JSON, tracked: Tracked) -> Requeue | None:
        grace = self.settings.lost_grace_seconds
        since = tracked.missing_since or tracked.first_seen
        age = self._now() - (_parse_time(pod["metadata"].get("creationTimestamp")) or self._now())
        never_ran = not tracked.ever_ran and not self._pod_once_ran(pod)
        elapsed = self.tracker.clock() - since
        if never_ran and age < grace:
            return Requeue(after=max(self.settings.status_poll_seconds, grace - age))
        if tracked.status.phase is Phase.UNKNOWN and elapsed < grace:
            return Requeue(after=max(self.settings.status_poll_seconds, grace - elapsed))
        what = "vanished from" if tracked.missing_since is not None else "is unknown to"
        return await self._fail(
            pod, reasons.PROVIDER_LOST, f"the deployment {what} provider {tracked.provider}"
        )

    async def _terminal(self, pod: JSON, tracked: Tracked) -> Requeue | None:
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
        if restart:
            self.restarts[uid] = self.restarts.get(uid, 0) + 1
            self._restarting.add(uid)
            await self._write(pod, status, tracked.provider, restarts=self.restarts[uid], phase="Running")
            await self._delete_deployment(uid, keep_placement=True)
            await self.events.pod(pod, "Normal", "Restarting", f"container exited; restartPolicy {policy}")
            return Requeue(backoff=True)
        if status.phase is Phase.SUCCEEDED:
            await self._write(pod, status, tracked.provider, phase="Succeeded")
        else:
            reason = status.reason or reasons.PROVIDER_FAILED
            message = status.message or f"the deployment failed on provider {tracked.provider}"
            await self.events.pod(pod, "Warning", reason, message)
            await self._write(pod, status, tracked.provider, phase="Failed", reason=reason, message=message)
        await self._cleanup_terminal(uid)
        return None

    async def _write(
        self,
        pod: JSON,
        deployment: DeploymentStatus | None,
        provider: str,
        *,
        phase: str | None = None,
        reason: str = "",
        message: str = "",
        restarts: int = 0,
    ) -> None:
        uid = pod["metadata"]["uid"]
        for attempt in range(2):
            desired = build_status(
                pod,
                deployment,
                provider=provider,
                host_ip=self.settings.host_ip,
                phase=phase,
                reason=reason,
                message=message,
                restarts=restarts,
            )
            if not needs_write(pod, desired):
                return
            meta = pod["metadata"]
            try:
                await resources.patch_pod_status(
                    self.kube, meta["namespace"], meta["name"], desired, meta["resourceVersion"]
                )
                return
            except KubeNotFound:
                return
            except KubeConflict:
                if attempt:
                    raise  # still racing: the caller requeues with backoff
                # Our copy is stale: re-read once and rebuild from the fresh object.
                fresh = await resources.get_pod(self.kube, meta["namespace"], meta["name"])
                if fresh is None or fresh["metadata"]["uid"] != uid:
                    return
                if (fresh.get("status") or {}).get("phase") in TERMINAL:
                    return
                pod = fresh

    async def _write_pending(self, pod: JSON, reason: str, message: str) -> None:
        current = (pod.get("status") or {}).get("phase")
        if current == "Running":
            return  # never flip a Running pod back to Pending
        await self._write(pod, None, "none", phase="Pending", reason=reason, message=message)

    async def _fail(self, pod: JSON, reason: str, message: str) -> Requeue | None:
        await self.events.pod(pod, "Warning", reason, message)
        uid = pod["metadata"]["uid"]
        tracked = self.tracker.get(uid)
        await self._write(
            pod,
            tracked.status if tracked else None,
            tracked.provider if tracked else "none",
            phase="Failed",
            reason=reason,
            message=message,
        )
        await self._cleanup_terminal(uid)
        return None

    def _pod_once_ran(self, pod: JSON) -> bool:
        status = pod.get("status") or {}
        return status.get("phase") == "Running" or any(
            "running" in (c.get("state") or {}) or "terminated" in (c.get("state") or {})
            for c in status.get("containerStatuses") or []
        )

    async def _annotate(self, pod: JSON, annotations: dict[str, str]) -> None:
        meta = pod["metadata"]
        try:
            await resources.patch_pod_annotations(self.kube, meta["namespace"], meta["name"], annotations)
        except KubeError as exc:
            log.warning("annotating %s/%s failed: %s", meta["namespace"], meta["name"], exc)

    # ------------------------------------------------------------------ deletion

    async def _deleting(self, pod: JSON) -> Requeue | None:
        """Graceful deletion: provider delete, wait for terminal or the grace period, then remove."""
        meta = pod["metadata"]
        uid = meta["uid"]
        tracked = self.tracker.get(uid)
        if tracked is not None and uid not in self._cleaned:
            try:
                await self._delete_deployment(uid)
                await self.events.pod(
                    pod,
                    "Normal",
                    reasons.PROVIDER_DELETE_SUCCESS,
                    f"deleted the deployment on {tracked.provider}",
                )
            except ProviderError as exc:
                await self.events.pod(pod, "Warning", reasons.PROVIDER_DELETE_FAILED, str(exc))
                deadline = _parse_time(meta.get("deletionTimestamp")) or 0.0
                if self._now() < deadline:
                    return Requeue(backoff=True)
        await resources.delete_pod_now(self.kube, meta["namespace"], meta["name"], uid)
        self.placer.release(uid)
        return None

    async def _vanished(self, key: str) -> None:
        """The API object is gone (deleted, or force-deleted): the deployment must go too."""
        uid = self.known_uids.pop(key, None)
        if uid is None:
            return
        await self._delete_deployment(uid)
        self.restarts.pop(uid, None)
        self._restarting.discard(uid)
        self._cleaned.discard(uid)

    async def _cleanup_terminal(self, uid: str) -> None:
        """A finished pod's deployment only costs money: delete it once, keep the pod as is."""
        if uid in self._cleaned:
            return
        try:
            await self._delete_deployment(uid)
        except ProviderError as exc:
            log.warning("deleting the deployment of finished pod %s failed: %s", uid, exc)
            return
        self._cleaned.add(uid)

    async def _delete_deployment(self, uid: str, *, keep_placement: bool = False) -> None:
        tracked = self.tracker.get(uid)
        names = [tracked.provider] if tracked else []
        placed = self.placer.placed(uid)
        if placed and placed[0] not in names:
            names.append(placed[0])
        for name in names:
            provider = self.providers.get(name)
            if provider is not None:
                await provider.delete(uid)
        self.tracker.forget(uid)
        if not keep_placement:
            self.placer.release(uid)


def is_relevant_change(old: JSON | None, new: JSON) -> bool:
    """Re-sync on spec, label, annotation or deletion changes; ignore status-only updates."""
    if old is None:
        return True
    om, nm = old["metadata"], new["metadata"]
    if om.get("uid") != nm.get("uid"):
        return True
    keys: tuple[str, ...] = ("labels", "annotations", "deletionTimestamp", "generation")
    if any(om.get(k) != nm.get(k) for k in keys):
        return True
    return bool(old.get("spec") != new.get("spec"))


__all__ = ["PodSync", "Requeue", "SyncSettings", "is_relevant_change"]
