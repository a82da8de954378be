"""Orphan collection (DESIGN §4.9): deployments that keep billing with nothing to show for it.

A deployment labelled for this node is an orphan when

* its pod no longer exists, or has finished (Succeeded/Failed: it only costs money), or
* its pod exists but is placed on *another* provider (a twin: an ambiguous create that
  succeeded after placement had moved on). The placement is what both records of it say: the
  ``vkprovider.io/provider`` annotation and the placer's in-memory record. A provider named by
  either is never touched, and a pod with neither (placement unknown) is left alone. A copy is a
  twin only when a claimed provider really holds *another* copy: an annotation can be stale (a
  restart-redeploy on q whose annotation write had not landed still names p), and then the copy
  on q is the pod's only one.

Only a term whose caches are synced may collect (a stale cache would make live pods look
gone), pods a worker holds right now are skipped (their placement may be mid-change), and one
failing delete is logged and counted without stopping the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from vkprovider.errors import ProviderError
from vkprovider.kube.client import JSON
from vkprovider.kube.informer import object_key
from vkprovider.logs import pod_action
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.pods.sync import ANNOTATION_PROVIDER
from vkprovider.pods.term import Term

log = logging.getLogger(__name__)

_FINISHED = ("Succeeded", "Failed")


@dataclass
class OrphanPass:
    deleted: int = 0
    failed: int = 0


def _claims(pod: JSON, placer: Placer) -> set[str]:
    """The providers this pod's placement names (annotation and placer); empty if unknown."""
    annotated = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_PROVIDER)
    placed = placer.placed(pod["metadata"]["uid"])
    return {name for name in (annotated, placed[0] if placed else None) if name}


def _why_orphaned(term: Term, placer: Placer, uid: str, provider: str, pods: Mapping[str, JSON]) -> str:
    """Why the deployment of ``uid`` on ``provider`` should go, or "" to keep it."""
    pod = pods.get(uid)
    if pod is None:
        return "" if uid in term.sync.states.uids() else "its pod no longer exists"
    if term.queue.processing(object_key(pod)):
        return ""  # a worker holds the pod: its placement may be changing right now
    if (pod.get("status") or {}).get("phase") in _FINISHED:
        return "its pod has finished"
    claims = _claims(pod, placer)
    if claims and provider not in claims and _claimed_copy(term, uid, claims):
        return f"its pod is placed on {'/'.join(sorted(claims))}"
    return ""


def _claimed_copy(term: Term, uid: str, claims: set[str]) -> bool:
    """Does a provider the placement names hold a copy of ``uid`` that its last list showed?"""
    return any(
        tracked.provider in claims and tracked.missing_since is None
        for _, tracked in term.tracker.entries(uid)
    )


async def collect_orphans(term: Term, providers: Mapping[str, Provider], placer: Placer) -> OrphanPass:
    """One pass over every tracked deployment (twins included); see the module docstring."""
    result = OrphanPass()
    if not term.synced:
        return result  # never judge from a cache this term has not listed itself
    pods = {item["metadata"]["uid"]: item for item in term.informer.cache.values()}
    for uid, tracked in list(term.tracker.entries()):
        why = _why_orphaned(term, placer, uid, tracked.provider, pods)
        provider = providers.get(tracked.provider)
        if not why or provider is None:
            continue
        try:
            await provider.delete(uid)
        except ProviderError as exc:
            result.failed += 1
            pod_action(
                log,
                "orphan-delete",
                "failed",
                pod="",
                uid=uid,
                provider=tracked.provider,
                why=why,
                error=str(exc),
                level=logging.WARNING,
            )
            continue
        pod_action(log, "orphan-delete", "ok", pod="", uid=uid, provider=tracked.provider, why=why)
        term.tracker.forget(uid, tracked.provider)
        if uid not in pods and next(term.tracker.entries(uid), None) is None:
            placer.release(uid)
        result.deleted += 1
    return result
