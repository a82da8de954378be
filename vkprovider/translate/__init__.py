"""PodSpec → provider-neutral ``DeploymentRequest``, resolved as the kubelet would resolve it."""

from vkprovider.translate.pod import translate_pod
from vkprovider.translate.quantity import cpu_cores, memory_bytes, parse_quantity
from vkprovider.translate.types import GPU_RESOURCE, ObjectSource, Translation, TranslationEvent

__all__ = [
    "GPU_RESOURCE",
    "ObjectSource",
    "Translation",
    "TranslationEvent",
    "cpu_cores",
    "memory_bytes",
    "parse_quantity",
    "translate_pod",
]
