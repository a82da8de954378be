"""GPU count and type requested by a pod.

Count: the ``nvidia.com/gpu`` limit (or request) summed over containers, or the largest init
container's if bigger (the scheduler's effective-request rule). Type, first found wins: the
``vkprovider.io/gpu-type`` annotation, a nodeSelector on a known GPU label, or a required node
affinity ``In`` term on one. Names are normalized (``vkprovider.gpus``) so they compare with offers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vkprovider.gpus import normalize_gpu
from vkprovider.translate._fields import items, obj, str_map, text
from vkprovider.translate.quantity import whole_count
from vkprovider.translate.types import TranslationEvent

GPU_TYPE_ANNOTATION = "vkprovider.io/gpu-type"
#: Node labels that name a GPU type, in order of preference.
GPU_TYPE_LABELS = (
    "vkprovider.io/gpu-type",
    "nvidia.com/gpu.product",
    "gpu-type",
    "gpu.nvidia.com/class",
    "cloud.google.com/gke-accelerator",
    "node.kubernetes.io/gpu-type",
)


def _container_gpus(container: Mapping[str, Any], path: str, resource: str) -> int:
    resources = obj(container.get("resources"), f"{path}.resources")
    for kind in ("limits", "requests"):
        section = obj(resources.get(kind), f"{path}.resources.{kind}")
        if resource in section:
            return whole_count(section[resource], f"{path}.resources.{kind}[{resource}]")
    return 0


def gpu_count(spec: Mapping[str, Any], resource: str) -> int:
    total = sum(
        _container_gpus(obj(c, f"spec.containers[{i}]"), f"spec.containers[{i}]", resource)
        for i, c in enumerate(items(spec.get("containers"), "spec.containers"))
    )
    init = [
        _container_gpus(obj(c, f"spec.initContainers[{i}]"), f"spec.initContainers[{i}]", resource)
        for i, c in enumerate(items(spec.get("initContainers"), "spec.initContainers"))
    ]
    return max([total, *init])


def _affinity_values(spec: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(key, values) of every required node-affinity ``In`` expression, in order."""
    affinity = obj(
        obj(spec.get("affinity"), "spec.affinity").get("nodeAffinity"), "spec.affinity.nodeAffinity"
    )
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = obj(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), path)
    found: list[tuple[str, list[str]]] = []
    for t, term in enumerate(items(required.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")):
        tpath = f"{path}.nodeSelectorTerms[{t}]"
        for e, expr in enumerate(
            items(obj(term, tpath).get("matchExpressions"), f"{tpath}.matchExpressions")
        ):
            epath = f"{tpath}.matchExpressions[{e}]"
            expr = obj(expr, epath)
            if text(expr.get("operator"), f"{epath}.operator") != "In":
                continue
            values = [text(v, f"{epath}.values") for v in items(expr.get("values"), f"{epath}.values")]
            found.append((text(expr.get("key"), f"{epath}.key"), [v for v in values if v]))
    return found


def gpu_type(pod: Mapping[str, Any], warnings: list[TranslationEvent]) -> str | None:
    annotations = str_map(obj(pod.get("metadata"), "metadata").get("annotations"), "metadata.annotations")
    if annotations.get(GPU_TYPE_ANNOTATION):
        return normalize_gpu(annotations[GPU_TYPE_ANNOTATION]) or None
    spec = obj(pod.get("spec"), "spec")
    selector = str_map(spec.get("nodeSelector"), "spec.nodeSelector")
    for label in GPU_TYPE_LABELS:
        if selector.get(label):
            return normalize_gpu(selector[label]) or None
    terms = _affinity_values(spec)
    for label in GPU_TYPE_LABELS:
        for key, values in terms:
            if key == label and values:
                if len({normalize_gpu(v) for v in values}) > 1:
                    message = f"node affinity on {label} allows {len(values)} GPU types; using {values[0]!r}"
                    warnings.append(TranslationEvent("MultipleGpuTypes", message))
                return normalize_gpu(values[0]) or None
    return None
