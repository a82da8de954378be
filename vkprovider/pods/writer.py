"""Writing what the pod shows: status patches guarded by resourceVersion, and our annotations.

Status comes only from the provider (``build_status``); a write is skipped when the pod already
shows it, carries the resourceVersion it was built from (a stale copy gets 409, re-read once,
never a clobber), and is never made to a finished pod.

Our annotations (provider, offer, placement, images) ride on the same ``pods/status`` patch
when there is one: for pods the status subresource keeps metadata changes (it resets only
spec, deletionTimestamp and ownerReferences; kubernetes/kubernetes#92022), so a pod goes from
bound to Running with one write instead of two, and its status never shows a deployment whose
provider annotation is missing. Should an apiserver ever drop them, the answer says so and a
metadata patch follows. The answer is read (a whole pod's JSON decoded, ~5 % of the service's
CPU on the way up) only until one shows the annotations kept: the apiserver's status strategy
does not change within a leadership term, and a new term (a new writer) asks again. Once an
answer showed them dropped, every such write is checked. ``annotate`` alone (no status to
write) patches metadata.
"""

from __future__ import annotations

import logging

from vkprovider.kube import resources
from vkprovider.kube.client import JSON
from vkprovider.kube.errors import KubeConflict, KubeError, KubeNotFound
from vkprovider.models import DeploymentStatus
from vkprovider.pods.context import TERMINAL, SyncDeps
from vkprovider.pods.status import PROVIDER_REACHABLE, build_status, needs_write

log = logging.getLogger(__name__)


def shows_unreachable(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == PROVIDER_REACHABLE and c.get("status") == "False" for c in conditions)


class StatusWriter:
    def __init__(self, deps: SyncDeps) -> None:
        self._deps = deps
        #: does this apiserver keep metadata sent with a status write? None until an answer showed
        #: it (see the module docstring); True: answers are no longer decoded
        self.status_keeps_metadata: bool | None = None

    async def write(
        self,
        pod: JSON,
        deployment: DeploymentStatus | None,
        provider: str,
        *,
        phase: str | None = None,
        reason: str = "",
        message: str = "",
        restarts: int = 0,
        waiting: tuple[str, str] | None = None,
        reachable: bool | None = None,
        annotations: dict[str, str] | None = None,
        route: tuple[bool, str, str] | None = None,
    ) -> None:
        """Write the status for ``deployment`` (and ``annotations`` in the same patch).
        ``route`` sets the ``ServiceRoute`` condition (None: kept as shown).
        ``reachable=False`` marks the provider unreachable; otherwise a pod that shows it
        unreachable is marked reachable again."""
        uid = pod["metadata"]["uid"]
        for attempt in range(2):
            desired = build_status(
                pod,
                deployment,
                provider=provider,
                host_ip=self._deps.settings.host_ip,
                phase=phase,
                reason=reason,
                message=message,
                restarts=restarts,
                waiting=waiting,
                reachable=True if reachable is None and shows_unreachable(pod) else reachable,
                hide_pod_ip=self._deps.settings.publishes(provider),
                route=route,
            )
            meta = pod["metadata"]
            missing = _missing(meta, annotations)
            if not missing and not needs_write(pod, desired):
                return
            check = bool(missing) and self.status_keeps_metadata is not True
            try:
                answer = await resources.patch_pod_status(
                    self._deps.kube,
                    meta["namespace"],
                    meta["name"],
                    desired,
                    meta["resourceVersion"],
                    annotations=missing or None,
                    decode=check,
                )
            except KubeNotFound:
                return
            except KubeConflict:
                if attempt:
                    raise  # still racing: the caller requeues with backoff
                # Our copy is stale: re-read once and rebuild from the fresh object.
                fresh = await resources.get_pod(self._deps.kube, meta["namespace"], meta["name"])
                if fresh is None or fresh["metadata"]["uid"] != uid:
                    return
                if (fresh.get("status") or {}).get("phase") in TERMINAL:
                    return
                pod = fresh
                continue
            if check and isinstance(answer, dict):
                dropped = _missing(answer.get("metadata") or {}, missing)
                self.status_keeps_metadata = not dropped
                if dropped:
                    await self.annotate(answer, missing)  # this apiserver keeps status writes to status
            return

    async def pending(
        self,
        pod: JSON,
        reason: str,
        message: str,
        *,
        waiting: tuple[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        """Pending with ``reason``; containers wait with ``waiting`` (default: the same reason)."""
        if (pod.get("status") or {}).get("phase") == "Running":
            if annotations:
                await self.annotate(pod, annotations)
            return  # never flip a Running pod back to Pending
        await self.write(
            pod,
            None,
            "none",
            phase="Pending",
            reason=reason,
            message=message,
            waiting=waiting or (reason, message),
            annotations=annotations,
        )

    async def annotate(self, pod: JSON, annotations: dict[str, str]) -> JSON:
        """Patch our annotations; returns the patched pod (or ``pod`` if the patch failed)."""
        meta = pod["metadata"]
        try:
            patched = await resources.patch_pod_annotations(
                self._deps.kube, meta["namespace"], meta["name"], annotations
            )
        except KubeError as exc:
            log.warning("annotating %s/%s failed: %s", meta["namespace"], meta["name"], exc)
            return pod
        if not isinstance(patched, dict) or patched.get("metadata", {}).get("uid") != meta["uid"]:
            return pod
        return patched


def _missing(meta: JSON, annotations: dict[str, str] | None) -> dict[str, str]:
    """The part of ``annotations`` that ``meta`` does not show yet."""
    if not annotations:
        return {}
    shown = meta.get("annotations") or {}
    return {k: v for k, v in annotations.items() if shown.get(k) != v}
