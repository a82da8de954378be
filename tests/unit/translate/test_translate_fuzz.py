"""Property: on any pod-ish input translation either succeeds or raises ``InvalidRequest``."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from translate_helpers import BASE_POD, DictSource

from vkprovider.errors import InvalidRequest
from vkprovider.translate import translate_pod

_KEYS = [
    "name", "image", "env", "envFrom", "value", "valueFrom", "fieldRef", "fieldPath", "resourceFieldRef",
    "resource", "divisor", "configMapKeyRef", "secretKeyRef", "key", "optional", "prefix", "configMapRef",
    "secretRef", "command", "args", "ports", "containerPort", "protocol", "hostPort", "resources", "limits",
    "requests", "cpu", "memory", "nvidia.com/gpu", "volumeMounts", "mountPath", "subPath", "volumes",
    "configMap", "secret", "secretName", "items", "path", "mode", "defaultMode", "projected", "sources",
    "emptyDir", "downwardAPI", "hostPath", "nodeSelector", "affinity", "imagePullSecrets", "restartPolicy",
    "securityContext", "privileged", "initContainers", "containers", "labels", "annotations", "uid",
    "enableServiceLinks", "workingDir",
]  # fmt: skip

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True),
    st.sampled_from(["", "a", "1", "500m", "2Gi", "$(a)", "metadata.name", "limits.cpu", "In", "cm", "s"]),
    st.text(max_size=8),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=20,
)


def _set_path(pod: dict[str, Any], path: list[str], value: Any) -> None:
    target: Any = pod
    for key in path[:-1]:
        if isinstance(target, list):
            target = target[0] if target else None
        if not isinstance(target, dict):
            return
        target = target.setdefault(key, {})
    if isinstance(target, list):
        target = target[0] if target else None
    if isinstance(target, dict):
        target[path[-1]] = value


_PATHS = [
    ["spec", "containers", "env"],
    ["spec", "containers", "envFrom"],
    ["spec", "containers", "resources"],
    ["spec", "containers", "ports"],
    ["spec", "containers", "volumeMounts"],
    ["spec", "containers", "command"],
    ["spec", "volumes"],
    ["spec", "affinity"],
    ["spec", "nodeSelector"],
    ["spec", "imagePullSecrets"],
    ["spec", "initContainers"],
    ["spec", "containers"],
    ["metadata", "labels"],
    ["metadata"],
    ["spec"],
]
_SOURCE = DictSource(config_maps={"cm": {"a": "1"}}, secrets={"s": {"a": b"x", ".dockercfg": b"{}"}})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(range(len(_PATHS))), _json), min_size=1, max_size=3))
def test_translation_raises_only_invalid_request(edits: list[tuple[int, Any]]) -> None:
    pod = copy.deepcopy(BASE_POD)
    for index, value in edits:
        _set_path(pod, _PATHS[index], value)
    with contextlib.suppress(InvalidRequest):
        asyncio.run(translate_pod(pod, node_name="vk", source=_SOURCE))


@settings(max_examples=100, deadline=None)
@given(_json)
def test_arbitrary_json_as_pod(value: Any) -> None:
    with contextlib.suppress(InvalidRequest):
        asyncio.run(translate_pod(value, node_name="vk", source=_SOURCE))
