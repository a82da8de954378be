"""PodSpec → provider-neutral ``DeploymentRequest``, resolved as the kubelet would resolve it."""

from vkprovider.translate.annotations import SERVICE_ANNOTATIONS, forwarded_annotations
from vkprovider.translate.pod import translate_pod
from vkprovider.translate.quantity import cpu_cores, memory_bytes, parse_quantity
from vkprovider.translate.types import (
    GPU_RESOURCE,
    MissingReference,
    ObjectSource,
    Translation,
    TranslationEvent,
)

__all__ = [
    "GPU_RESOURCE",
    "SERVICE_ANNOTATIONS",
    "MissingReference",
    "ObjectSource",
    "Translation",
    "TranslationEvent",
    "cpu_cores",
    "forwarded_annotations",
    "memory_bytes",
    "parse_quantity",
    "translate_pod",
]
