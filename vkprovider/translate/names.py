"""The names of the objects a pod references, checked before anything is read.

A pod names Secrets and ConfigMaps in volumes, projected sources, ``envFrom``, ``valueFrom`` and
``imagePullSecrets``. The apiserver only checks volume and pull-secret names are non-empty, and
the service reads them with cluster-wide rights, so a name such as
``../../kube-system/secrets/x`` would walk the API path to another namespace. Every such name must
be a DNS-1123 subdomain (what a Secret or ConfigMap name can be at all); one that is not can
never name an object the pod may read:

* a volume or environment reference fails the pod (``InvalidPodSpec``, the field named);
* an ``imagePullSecrets`` entry is skipped with a ``FailedToRetrieveImagePullSecret`` Warning and
  the pod runs without it, as the kubelet does for a pull secret it cannot read.

``check_references`` walks the whole spec up front (translation then reads nothing for a pod it
will refuse); ``reference_name`` is the same check at each read site, so no path around the walk
reaches a read with an unchecked name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from vkprovider.translate._fields import invalid, items, obj, required_text, text
from vkprovider.translate.types import TranslationEvent

PULL_SECRET_REASON = "FailedToRetrieveImagePullSecret"
_MAX_LENGTH = 253
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def is_dns_subdomain(name: str) -> bool:
    """A DNS-1123 subdomain (``IsDNS1123Subdomain``): lower-case alphanumerics, ``-`` and ``.``,
    starting and ending alphanumeric, at most 253 characters."""
    return len(name) <= _MAX_LENGTH and _SUBDOMAIN.fullmatch(name) is not None


def _problem(name: str) -> str:
    shown = name if len(name) <= 80 else name[:80] + "…"
    return (
        f"{shown!r} is not a valid object name (a DNS-1123 subdomain: lower-case letters, digits, "
        f"'-' and '.', at most {_MAX_LENGTH} characters)"
    )


def reference_name(value: Any, path: str) -> str:
    """The referenced object's name at ``path``: required, a string, and a DNS-1123 subdomain."""
    name = required_text(value, path)
    if not is_dns_subdomain(name):
        raise invalid(path, _problem(name))
    return name


def _optional_name(value: Any, path: str) -> None:
    """Check a name if one is given (a missing one is reported, as before, where it is used)."""
    if text(value, path):
        reference_name(value, path)


def _keyed_source(source: Mapping[str, Any], path: str, *, secret_volume: bool = False) -> None:
    key = "secretName" if secret_volume and "secretName" in source else "name"
    _optional_name(source.get(key), f"{path}.{key}")


def _volumes(spec: Mapping[str, Any]) -> None:
    for i, raw in enumerate(items(spec.get("volumes"), "spec.volumes")):
        path = f"spec.volumes[{i}]"
        volume = obj(raw, path)
        if volume.get("secret") is not None:
            _keyed_source(obj(volume["secret"], f"{path}.secret"), f"{path}.secret", secret_volume=True)
        if volume.get("configMap") is not None:
            _keyed_source(obj(volume["configMap"], f"{path}.configMap"), f"{path}.configMap")
        if volume.get("projected") is not None:
            ppath = f"{path}.projected"
            projected = obj(volume["projected"], ppath)
            for j, raw_source in enumerate(items(projected.get("sources"), f"{ppath}.sources")):
                spath = f"{ppath}.sources[{j}]"
                source = obj(raw_source, spath)
                for kind in ("secret", "configMap"):
                    if source.get(kind) is not None:
                        _keyed_source(obj(source[kind], f"{spath}.{kind}"), f"{spath}.{kind}")


def _containers(spec: Mapping[str, Any]) -> None:
    for kind in ("initContainers", "containers"):
        for i, raw in enumerate(items(spec.get(kind), f"spec.{kind}")):
            path = f"spec.{kind}[{i}]"
            container = obj(raw, path)
            for j, raw_from in enumerate(items(container.get("envFrom"), f"{path}.envFrom")):
                fpath = f"{path}.envFrom[{j}]"
                source = obj(raw_from, fpath)
                for ref in ("configMapRef", "secretRef"):
                    if source.get(ref) is not None:
                        _optional_name(obj(source[ref], f"{fpath}.{ref}").get("name"), f"{fpath}.{ref}.name")
            for j, raw_env in enumerate(items(container.get("env"), f"{path}.env")):
                epath = f"{path}.env[{j}]"
                value_from = obj(obj(raw_env, epath).get("valueFrom"), f"{epath}.valueFrom")
                for ref in ("configMapKeyRef", "secretKeyRef"):
                    if value_from.get(ref) is not None:
                        rpath = f"{epath}.valueFrom.{ref}"
                        _optional_name(obj(value_from[ref], rpath).get("name"), f"{rpath}.name")


def pull_secret_names(spec: Mapping[str, Any], warnings: list[TranslationEvent]) -> list[str]:
    """The ``imagePullSecrets`` names that may be read; each invalid one becomes a Warning."""
    names: list[str] = []
    for i, ref in enumerate(items(spec.get("imagePullSecrets"), "spec.imagePullSecrets")):
        path = f"spec.imagePullSecrets[{i}]"
        name = text(obj(ref, path).get("name"), f"{path}.name")
        if not name:
            continue
        if not is_dns_subdomain(name):
            message = f"{path}.name: {_problem(name)}; the pod runs without this pull secret"
            warnings.append(TranslationEvent(PULL_SECRET_REASON, message))
            continue
        names.append(name)
    return names


def check_references(pod: Mapping[str, Any]) -> None:
    """Raise ``InvalidRequest`` (``InvalidPodSpec``) naming the first volume or environment
    reference whose object name is not a DNS-1123 subdomain."""
    spec = obj(pod.get("spec"), "spec")
    _volumes(spec)
    _containers(spec)
