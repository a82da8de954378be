"""Which pod annotations travel to the provider: only the ``vkprovider.io/`` controls.

A pod's annotations belong to the cluster, not to the cloud: they hold
``kubectl.kubernetes.io/last-applied-configuration`` (the whole manifest, sometimes with
inline credentials), controller bookkeeping and other tools' notes. Clouds need none of that,
so only the placement/translation controls under ``vkprovider.io/`` (``gpu-type``,
``providers``, ``max-price`` …) are forwarded, minus the annotations the service itself writes
back onto the pod (large, and meaningless to a cloud).
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "vkprovider.io/"

#: Annotations the pod controller writes onto pods (kept here, the lowest layer that needs them;
#: ``vkprovider.pods`` uses the same names).
SERVICE_ANNOTATIONS = frozenset(
    {
        "vkprovider.io/provider",
        "vkprovider.io/offer",
        "vkprovider.io/images",
        "vkprovider.io/placement",
        "vkprovider.io/restarting",
        "vkprovider.io/endpoints",  # vkprovider.traffic.route.ANNOTATION_ROUTE
    }
)


def forwarded_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The subset of ``annotations`` a ``DeploymentRequest`` carries."""
    return {
        key: value
        for key, value in annotations.items()
        if key.startswith(PREFIX) and key not in SERVICE_ANNOTATIONS
    }
