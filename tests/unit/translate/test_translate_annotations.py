"""Only the vkprovider.io/ controls travel to a cloud; the cluster's own annotations stay home."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vkprovider.placement.explain import ANNOTATION_KEY
from vkprovider.pods.resume import ANNOTATION_RESTARTING
from vkprovider.pods.sync import ANNOTATION_OFFER, ANNOTATION_PROVIDER
from vkprovider.pods.update import ANNOTATION_IMAGES
from vkprovider.traffic.route import ANNOTATION_ROUTE
from vkprovider.translate import SERVICE_ANNOTATIONS, translate_pod

PodFactory = Callable[..., dict[str, Any]]


async def test_only_placement_controls_are_forwarded(pod: PodFactory, source: Any) -> None:
    annotations = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Pod","password":"x"}',
        "team": "inference",
        "vkprovider.io/gpu-type": "H100",
        "vkprovider.io/max-price": "3.5",
        "vkprovider.io/placement": '{"chosen": "cheap"}',
        "vkprovider.io/provider": "cheap",
    }
    translation = await translate_pod(
        pod(metadata={"annotations": annotations}), node_name="vk-external", source=source
    )
    assert translation.request.annotations == {
        "vkprovider.io/gpu-type": "H100",
        "vkprovider.io/max-price": "3.5",
    }


def test_the_service_annotations_list_matches_what_the_pod_controller_writes() -> None:
    written = {
        ANNOTATION_KEY,
        ANNOTATION_PROVIDER,
        ANNOTATION_OFFER,
        ANNOTATION_IMAGES,
        ANNOTATION_RESTARTING,
        ANNOTATION_ROUTE,
    }
    assert written == SERVICE_ANNOTATIONS
