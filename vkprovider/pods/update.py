"""Spec changes to a running pod (in practice: a new image), handled like virtual-kubelet's
UpdatePod: applied in place where the provider can, otherwise reported, never silently ignored.

Deployed images are remembered in an annotation, so the comparison survives a restart.
"""

from __future__ import annotations

from typing import Any

ANNOTATION_IMAGES = "vkprovider.io/images"


def images_of(pod: dict[str, Any]) -> str:
    """A stable fingerprint of what would be deployed: ``name=image`` per container."""
    return ",".join(f"{c['name']}={c.get('image', '')}" for c in pod["spec"].get("containers") or [])


def deployed_images(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(ANNOTATION_IMAGES)


def spec_changed(pod: dict[str, Any]) -> bool:
    deployed = deployed_images(pod)
    return deployed is not None and deployed != images_of(pod)
