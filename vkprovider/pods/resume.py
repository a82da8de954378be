"""Picking up a pod in a new term: what the previous term (ours, or another replica's) left.

A term's memory (``PodStates``, the tracker, the Placer's per-pod book) starts empty; what it
knows of a pod that existed before comes from the pod object and the providers' lists. This
module turns those into the term's state, so that a restart or a leader move changes nothing a
pod shows:

* **Adoption**: whenever a tracked deployment exists that placement does not know (or knows on
  another provider), placement adopts it: budget share, spread slot, placement. Not only on
  first sight: after a restart during a provider outage that provider's pods are adopted when
  its list answers again.
* **Primary**: the copy the pod's ``vkprovider.io/provider`` annotation names is the pod's, other
  copies are twins (whichever list arrived first says nothing). Only for a placement this term
  did not make itself: a deploy of this term is the truth for it.
* **Restart intent**: a restart for restartPolicy deletes the deployment, then redeploys after a
  backoff. Before the delete, ``vkprovider.io/restarting=<restartCount>`` is written on the pod
  (with the status that shows the new count); a new term that finds it, matching the count the
  pod shows, redeploys instead of calling the pod ``ProviderLost``. The successful redeploy
  clears it (empty value).
* **Unlisted providers**: a pod that existed before the term and has no known deployment may
  have been deployed in the last moments of the previous term on a provider whose list has not
  answered yet. Before deploying it, each such provider is asked with a ``get``; while one
  cannot answer (``Transient``: unreachable, timed out) the sync is retried with backoff — the
  pod waits, with no time limit, until that provider answers (its list or the ``get``), as an
  ambiguous create does. Never deployed a second time elsewhere. A provider that answers with a
  refusal (no API key, billing, a bad request) has answered and is skipped, as placement would.
"""

from __future__ import annotations

import asyncio

from vkprovider.errors import ProviderError, Transient
from vkprovider.kube.client import JSON
from vkprovider.models import Phase
from vkprovider.pods.context import ANNOTATION_PROVIDER, SyncDeps
from vkprovider.pods.podview import placement_context, shown_restarts
from vkprovider.pods.state import PodRecord
from vkprovider.pods.tracker import Tracked

#: How long one ``get`` to a provider that has not listed yet may take before the pod waits on.
GET_TIMEOUT_SECONDS = 30.0

#: The restart intent: the restartCount of a restart whose redeploy has not happened yet ("": none).
ANNOTATION_RESTARTING = "vkprovider.io/restarting"


def _annotations(pod: JSON) -> dict[str, str]:
    return dict(pod["metadata"].get("annotations") or {})


def restart_pending(pod: JSON) -> bool:
    """The pod carries a restart intent for the restartCount it shows."""
    value = _annotations(pod).get(ANNOTATION_RESTARTING, "")
    return value.isdigit() and int(value) == shown_restarts(pod)


def restart_intent(restarts: int) -> dict[str, str]:
    """The annotation to write, with the status showing ``restarts``, before the delete."""
    return {ANNOTATION_RESTARTING: str(restarts)}


def restart_done(pod: JSON) -> dict[str, str]:
    """The annotation change that clears an intent the pod shows (nothing if none)."""
    return {ANNOTATION_RESTARTING: ""} if _annotations(pod).get(ANNOTATION_RESTARTING) else {}


class Resume:
    def __init__(self, deps: SyncDeps) -> None:
        self._deps = deps
        #: UIDs of the pods that existed when this term listed (set by the controller)
        self.inherited: frozenset[str] = frozenset()

    def first_sight(self, pod: JSON, record: PodRecord) -> None:
        """Take over the counters a previous term left on the pod object."""
        record.restarts = shown_restarts(pod)  # a restarted service keeps counting
        if restart_pending(pod):
            record.restarting = True  # the previous term deleted it to restart it

    def adopt(self, pod: JSON, record: PodRecord) -> None:
        """Make the tracker's primary and placement agree with what the pod says (see module).

        An annotation that names no live copy (stale, or never written: a deploy in the last
        moments of the previous term) is corrected to the adopted copy with the next write."""
        deps, uid = self._deps, pod["metadata"]["uid"]
        placed = deps.placer.placed(uid)
        if placed is None or deps.placer.adopted(uid):
            self._prefer_annotated(pod)
        tracked = deps.tracker.get(uid)
        if tracked is None or (placed is not None and placed[0] == tracked.provider):
            return
        deps.placer.adopt(
            uid,
            placement_context(pod),
            tracked.provider,
            offer_id=tracked.status.offer_id,
            price_per_hour=tracked.status.price_per_hour,
        )
        if _annotations(pod).get(ANNOTATION_PROVIDER) != tracked.provider:
            record.annotations = {**(record.annotations or {}), ANNOTATION_PROVIDER: tracked.provider}

    def _prefer_annotated(self, pod: JSON) -> None:
        uid = pod["metadata"]["uid"]
        annotated = _annotations(pod).get(ANNOTATION_PROVIDER)
        primary = self._deps.tracker.get(uid)
        if not annotated or primary is None or primary.provider == annotated:
            return
        twin = self._deps.tracker.twins.get(uid, {}).get(annotated)
        if twin is None:
            return
        if _ended(twin) and not _ended(primary):
            return  # the named copy is an old one being deleted (a restart); the live one is it
        self._deps.tracker.prefer(uid, annotated)

    def live(self, pod: JSON, record: PodRecord, tracked: Tracked) -> None:
        """A live deployment backs the pod: a pending restart happened (a previous term's
        redeploy landed before it could clear the intent); the next exit is a new one."""
        if record.restarting and not _ended(tracked):
            record.restarting = False
            done = restart_done(pod)
            if done:
                record.annotations = {**(record.annotations or {}), **done}

    async def find_unlisted(self, pod: JSON, record: PodRecord) -> Tracked | None:
        """Before deploying a pod of an earlier term: ask providers whose list has not answered.

        Raises the provider's error (``Transient``: retried) while one cannot answer."""
        uid = pod["metadata"]["uid"]
        if uid not in self.inherited:
            return None
        deps = self._deps
        for name in deps.tracker.unanswered():
            try:
                async with asyncio.timeout(GET_TIMEOUT_SECONDS):
                    status = await deps.providers[name].get(uid)
            except Transient:
                raise  # unreachable: it may hold the pod, so the pod waits
            except ProviderError:
                # NotFound, or a refusal (no key, billing, a bad request): the provider answered,
                # and could not have taken the pod in this state either; waiting changes nothing.
                continue
            except TimeoutError:
                raise Transient(f"get of {uid} timed out", provider=name) from None
            deps.tracker.record(uid, name, status)
            self.adopt(pod, record)
            return deps.tracker.get(uid)
        return None


def _ended(tracked: Tracked) -> bool:
    return tracked.status.phase.terminal or tracked.status.phase is Phase.UNKNOWN
