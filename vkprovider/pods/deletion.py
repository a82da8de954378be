"""Ending a pod's deployment: graceful deletion, vanished pods, finished pods.

Graceful deletion follows the kubelet: on ``deletionTimestamp`` the provider is asked to stop
the deployment with the pod's grace period (``deletionGracePeriodSeconds``); the worker does not
wait but requeues until the provider reports the deployment ended (terminal or gone: a
``get``, unless the delete itself answered "gone") or the grace period is over; then the
object is deleted with grace 0 and a UID precondition. A pod with nothing running is deleted
at once.

Two requests per pod by default, the Event included (``ProviderDeleteSuccess``, then the
delete), as the Go virtual-kubelet library does: it deletes the object once the provider
stopped it and writes no status of its own. The terminated container states are written
before that delete only when the
object will outlive it (finalizers: a Job's tracking finalizer, say, whose controller reads
the outcome), so whoever keeps the object sees how the pod ended; a finalizer added meanwhile
is caught, as the object is then still there on the next sync. ``status_before_delete=True``
(``pods.status_before_delete``) writes them always, like the kubelet: one request more. The
outcome is written at most once per pod, and never over a terminal phase. It is ``Succeeded``
only on the provider's word (terminal Succeeded, every container exited 0); a deployment that
vanished without an exit code was interrupted: ``Failed``, exit code 137, the kubelet's
``ContainerStatusUnknown`` — a Job counts it as a failure, never as a completion.

An external replica published as a Service endpoint is drained first (``pods/drain.py``): the
provider delete waits, as a delayed requeue, until its endpoint is seen terminating and its grace
period is over (capped by ``traffic.drain_max_seconds``); what is left of the grace then goes to
the provider.

A deletion resumed by a new process (restart, new leader) sends the provider what is left of
the grace period (``deletionTimestamp - now``), never the full period again.

A pod whose object is gone (deleted, force-deleted, or replaced by a same-named pod) has its
deployment deleted before its record is retired; a failing delete raises, so the key is
retried with backoff and the deployment is never forgotten while it bills.
"""

from __future__ import annotations

import logging
import math

from vkprovider.errors import NotFound, ProviderError
from vkprovider.kube import resources
from vkprovider.kube.client import JSON
from vkprovider.kube.informer import object_key
from vkprovider.logs import pod_action
from vkprovider.models import ContainerState, DeploymentStatus, Phase
from vkprovider.pods import reasons
from vkprovider.pods.context import ANNOTATION_PROVIDER, Requeue, SyncDeps, parse_time
from vkprovider.pods.drain import drain_verdict
from vkprovider.pods.state import PodRecord
from vkprovider.pods.writer import StatusWriter

log = logging.getLogger(__name__)

#: Not yet ended: the provider still runs it.
_RUNNING = object()


class Deletion:
    def __init__(self, deps: SyncDeps, writer: StatusWriter) -> None:
        self._deps = deps
        self._writer = writer

    # ------------------------------------------------------------------ provider side

    def holders(self, uid: str, pod: JSON | None = None) -> list[str]:
        """Providers that may hold a deployment of ``uid``: tracked status and twins, placement,
        and the provider the pod's annotation names (a provider whose list failed since a restart)."""
        names = list(dict.fromkeys(tracked.provider for _, tracked in self._deps.tracker.entries(uid)))
        placed = self._deps.placer.placed(uid)
        annotated = ((pod or {}).get("metadata", {}).get("annotations") or {}).get(ANNOTATION_PROVIDER)
        for name in (placed[0] if placed else None, annotated):
            if name and name not in names:
                names.append(name)
        return [name for name in names if name in self._deps.providers]

    async def delete_deployment(
        self,
        uid: str,
        *,
        grace_seconds: float | None = None,
        keep_placement: bool = False,
        pod: JSON | None = None,
    ) -> set[str]:
        """Delete ``uid`` wherever it may run; raises ``ProviderError`` if any delete fails.

        Returns the providers whose delete answered that the deployment is gone (no ``get``
        needed to confirm it stopped)."""
        key = object_key(pod) if pod is not None else (self._deps.states.key_of(uid) or "")
        gone: set[str] = set()
        for name in self.holders(uid, pod):
            try:
                if await self._deps.providers[name].delete(uid, grace_period_seconds=grace_seconds):
                    gone.add(name)
            except ProviderError as exc:
                pod_action(log, "delete", "failed", pod=key, uid=uid, provider=name, error=str(exc))
                raise
            pod_action(log, "delete", "ok", pod=key, uid=uid, provider=name)
        self._deps.tracker.forget(uid)
        if not keep_placement:
            self._deps.placer.release(uid)
        return gone

    async def _ended(self, names: list[str], uid: str) -> DeploymentStatus | object | None:
        """The terminal status (or None: gone) once every holder has stopped; else ``_RUNNING``."""
        final: DeploymentStatus | None = None
        for name in names:
            try:
                status = await self._deps.providers[name].get(uid)
            except NotFound:
                continue
            if not status.phase.terminal:
                return _RUNNING
            final = status
        return final

    # ------------------------------------------------------------------ entry points

    async def reap(self, key: str, live_uid: str | None) -> None:
        """Pods of ``key`` other than ``live_uid`` are gone from the API: delete, then forget."""
        for record in self._deps.states.gone(key, live_uid):
            if not record.deployment_deleted:
                await self.delete_deployment(record.uid)
                record.deployment_deleted = True
            self._deps.placer.release(record.uid)
            self._deps.tracker.forget(record.uid)
            self._deps.states.retire(record)

    async def cleanup_terminal(self, record: PodRecord) -> Requeue | None:
        """A finished pod's deployment only costs money: delete it once, keep the pod as is."""
        if record.deployment_deleted:
            return None
        try:
            await self.delete_deployment(record.uid)
        except ProviderError as exc:
            log.warning("deleting the deployment of finished pod %s failed: %s", record.key, exc)
            return Requeue(backoff=True)
        record.deployment_deleted = True
        return None

    async def deleting(self, pod: JSON, record: PodRecord) -> Requeue | None:
        meta = pod["metadata"]
        if record.removed:
            # Our delete was sent; an object still here is held by finalizers: show its outcome.
            if meta.get("finalizers") and not record.outcome_written:
                await self._write_outcome(pod, record)
            return None
        uid = meta["uid"]
        deadline = parse_time(meta.get("deletionTimestamp")) or 0.0
        remaining = deadline - self._deps.now()
        grace_seconds = grace_left(meta.get("deletionGracePeriodSeconds"), remaining)
        # A finished pod whose deployment was already deleted has nothing left to stop.
        names = [] if record.deployment_deleted else self.holders(uid, pod)
        tracked = self._deps.tracker.get(uid)
        last = tracked.status if tracked else None
        provider = tracked.provider if tracked else (names[0] if names else "none")
        if not names and not record.delete_requested:
            record.deployment_deleted = True  # nothing runs: remove the object at once
            await self._remove(pod, record, None, provider, ended=True)
            return None
        if not record.delete_requested and (held := await self._drain(pod, record)) is not None:
            return held
        if not record.delete_requested:
            try:
                gone = await self.delete_deployment(
                    uid, grace_seconds=grace_seconds, keep_placement=True, pod=pod
                )
            except ProviderError as exc:
                await self._deps.events.pod(pod, "Warning", reasons.PROVIDER_DELETE_FAILED, str(exc))
                if remaining > 0:
                    return Requeue(backoff=True)
                # Grace is over: the object goes; the record keeps retrying the delete (reap).
                await self._remove(pod, record, last, provider, ended=False)
                return None
            record.delete_requested = True
            record.deployment_deleted = True
            # A provider whose delete answered "gone" has nothing left to confirm.
            record.stopping = [name for name in names if name not in gone]
            record.last_status = last
            await self._deps.events.pod(
                pod,
                "Normal",
                reasons.PROVIDER_DELETE_SUCCESS,
                f"deleted the deployment on {', '.join(names)}"
                + (f" (grace period {grace_seconds:g}s)" if grace_seconds else ""),
            )
        stopping = record.stopping
        try:
            ended = await self._ended(stopping, uid)
        except ProviderError as exc:
            if remaining > 0:
                log.info("%s: cannot confirm the deployment stopped yet: %s", record.key, exc)
                return Requeue(backoff=True)
            ended = _RUNNING
        if ended is _RUNNING and remaining > 0:
            return Requeue(after=min(self._deps.settings.status_poll_seconds, remaining))
        final = ended if isinstance(ended, DeploymentStatus) else record.last_status
        # Where it stopped: a provider still confirming, else the one that answered "gone"
        # (``names`` on this pass; on a retried object delete, what the first attempt recorded).
        recorded = record.stopped_on if record.stopped_on != "none" else provider
        where = (stopping or names or [recorded])[0]
        await self._remove(pod, record, final, where, ended=ended is not _RUNNING)
        return None

    async def _drain(self, pod: JSON, record: PodRecord) -> Requeue | None:
        """Hold the provider delete while the pod's published endpoint drains (pods/drain.py):
        a delayed requeue until then, or None when the deployment may be stopped now."""
        lookup = self._deps.endpoints
        if lookup is None:
            return None
        tracked = self._deps.tracker.get(record.uid)
        verdict = drain_verdict(
            pod,
            lookup(record.uid),
            now=self._deps.now(),
            max_seconds=self._deps.settings.traffic.drain_max_seconds,
            ended=tracked is not None and tracked.status.phase.terminal,
        )
        if verdict.stop_now:
            if record.drain_announced:
                pod_action(log, "drain", "done", pod=record.key, uid=record.uid, reason=verdict.reason)
            return None
        if not record.drain_announced and verdict.until is not None:
            record.drain_announced = True
            left = max(0.0, verdict.until - self._deps.now())
            await self._deps.events.pod(
                pod,
                "Normal",
                reasons.DRAINING,
                f"endpoint terminating; the deployment keeps serving in-flight requests and is "
                f"stopped in {left:.0f}s (grace period, at most traffic.drain_max_seconds)",
            )
        return Requeue(after=verdict.wait)

    async def _remove(
        self, pod: JSON, record: PodRecord, status: DeploymentStatus | None, provider: str, *, ended: bool
    ) -> None:
        """Delete the object (grace 0, UID precondition), after writing the terminated container
        states if it will outlive the delete (finalizers)."""
        meta = pod["metadata"]
        record.last_status, record.stopped_on, record.ended = status, provider, ended
        if self._deps.settings.status_before_delete or meta.get("finalizers"):
            await self._write_outcome(pod, record)
        await resources.delete_pod_now(self._deps.kube, meta["namespace"], meta["name"], meta["uid"])
        record.removed = True
        if record.deployment_deleted:
            self._deps.placer.release(meta["uid"])

    async def _write_outcome(self, pod: JSON, record: PodRecord) -> None:
        """The terminated container states: ``Succeeded`` only when the provider reported the
        end (terminal Succeeded, or every container exited 0). A deployment that vanished
        without an exit code, or outlived the grace period, ended unknown: ``Failed`` with exit
        code 137 and the kubelet's ``ContainerStatusUnknown`` (a Job must not count an
        interrupted pod as a completion). Conditions others set (``DisruptionTarget``) are kept
        by ``build_status``."""
        current = (pod.get("status") or {}).get("phase")
        status = record.last_status
        if current in ("Succeeded", "Failed") or (status is None and current != "Running"):
            record.outcome_written = True
            return
        if status is not None and reported_success(status):
            await self._writer.write(
                pod, status, record.stopped_on, phase="Succeeded", restarts=record.restarts
            )
        elif status is not None and status.phase is Phase.FAILED:
            await self._writer.write(
                pod,
                status,
                record.stopped_on,
                phase="Failed",
                reason=status.reason,
                message=status.message,
                restarts=record.restarts,
            )
        else:
            await self._writer.write(
                pod,
                status,
                record.stopped_on,
                phase="Failed",
                reason=reasons.CONTAINER_STATUS_UNKNOWN,
                message=CONTAINER_NOT_LOCATED
                if record.ended
                else "The container did not stop within the grace period",
                restarts=record.restarts,
            )
        record.outcome_written = True


#: The kubelet's message for a container it cannot find when the pod is terminated.
CONTAINER_NOT_LOCATED = "The container could not be located when the pod was terminated"


def reported_success(status: DeploymentStatus) -> bool:
    """The provider said it ended well: phase Succeeded, or every container terminated with
    exit code 0. Anything else (running, gone without a word, failed) is not a success."""
    if status.phase is Phase.SUCCEEDED:
        return True
    if status.phase is Phase.FAILED or not status.containers:
        return False
    return all(c.state is ContainerState.TERMINATED and c.exit_code == 0 for c in status.containers)


def grace_left(grace: float | None, remaining: float) -> float | None:
    """The grace to send the provider: the pod's ``deletionGracePeriodSeconds``, but never more
    than what is left until ``deletionTimestamp`` (a deletion resumed after a restart must not
    start the full grace again). Whole seconds, rounded up, like the API's own grace periods."""
    if grace is None:
        return None
    left = float(math.ceil(max(0.0, remaining)))
    return min(float(grace), left)
