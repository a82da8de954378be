"""Spec changes to a running pod (in practice: a new image), handled like virtual-kubelet's
UpdatePod: applied in place where the provider can, otherwise reported, never silently ignored.

Deployed images are remembered in an annotation, so the comparison survives a restart.
"""

from __future__ import annotations

from typing import Any

from vkprovider.errors import ProviderError
from vkprovider.pods import reasons
from vkprovider.pods.context import SyncDeps
from vkprovider.pods.state import PodRecord
from vkprovider.pods.tracker import Tracked
from vkprovider.pods.writer import StatusWriter
from vkprovider.translate import translate_pod

ANNOTATION_IMAGES = "vkprovider.io/images"


def images_of(pod: dict[str, Any]) -> str:
    """A stable fingerprint of what would be deployed: ``name=image`` per container."""
    return ",".join(f"{c['name']}={c.get('image', '')}" for c in pod["spec"].get("containers") or [])


def deployed_images(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(ANNOTATION_IMAGES)


def spec_changed(pod: dict[str, Any]) -> bool:
    deployed = deployed_images(pod)
    return deployed is not None and deployed != images_of(pod)


class InPlaceUpdate:
    def __init__(self, deps: SyncDeps, writer: StatusWriter) -> None:
        self._deps = deps
        self._writer = writer

    async def apply(self, pod: dict[str, Any], record: PodRecord, tracked: Tracked) -> None:
        """Apply a changed spec in place if the provider can; otherwise say so once, loudly."""
        provider = self._deps.providers.get(tracked.provider)
        if provider is None:
            return
        info = await provider.info()
        if not info.capabilities.update_in_place:
            wanted = images_of(pod)
            if record.update_reported == wanted:
                return
            record.update_reported = wanted
            await self._deps.events.pod(
                pod,
                "Warning",
                reasons.PROVIDER_UPDATE_FAILED,
                f"provider {tracked.provider} cannot update a deployment in place; the running "
                f"deployment keeps {(pod['metadata'].get('annotations') or {}).get(ANNOTATION_IMAGES)}. "
                "Delete the pod (or roll its Deployment) to apply the new spec.",
            )
            return
        translation = await translate_pod(
            pod, node_name=self._deps.settings.node_name, source=self._deps.objects
        )
        request = translation.request.model_copy(update={"offer_id": tracked.status.offer_id or None})
        try:
            status = await provider.deploy(request)
        except ProviderError as exc:
            await self._deps.events.pod(pod, "Warning", reasons.PROVIDER_UPDATE_FAILED, str(exc))
            raise
        self._deps.tracker.record(pod["metadata"]["uid"], tracked.provider, status)
        await self._deps.events.pod(
            pod, "Normal", reasons.PROVIDER_UPDATE_SUCCESS, f"updated in place on {tracked.provider}"
        )
        await self._writer.annotate(pod, {ANNOTATION_IMAGES: images_of(pod)})
