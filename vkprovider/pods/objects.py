"""The translator's view of ConfigMaps, Secrets and Services, read from the API server.

Services come from a cluster-wide informer cache when one is given (every pod needs them for
service-link variables, so one watch replaces a list call per pod); ConfigMaps and Secrets are
read per reference, so the service never holds every Secret of the cluster in memory.
A missing object is ``None`` (translation decides whether that fails the pod). A read RBAC
refuses (403) means the pod's namespace is not one the service serves (docs/deploy.md binds the
reads per namespace): the pod waits, like for a missing object, with a reason naming the refusal
(``SecretReadForbidden``), and starts once the namespace is bound. Any other API failure is
``Transient``, so the pod is retried rather than failed for a hiccup.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from vkprovider.errors import InvalidRequest, Transient
from vkprovider.kube import resources
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import InvalidObjectName, KubeError, KubeForbidden
from vkprovider.kube.informer import Informer
from vkprovider.translate import MissingReference


class ApiObjectSource:
    def __init__(self, kube: KubeClient, services: Informer | None = None) -> None:
        self._kube = kube
        self._services = services

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            cm = await resources.get_config_map(self._kube, namespace, name)
        except KubeError as exc:
            raise _read_failed("ConfigMap", namespace, name, exc) from None
        if cm is None:
            return None
        data = dict(cm.get("data") or {})
        for key, value in (cm.get("binaryData") or {}).items():
            data.setdefault(key, base64.b64decode(value).decode(errors="replace"))
        return data

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        try:
            secret = await resources.get_secret(self._kube, namespace, name)
        except KubeError as exc:
            raise _read_failed("Secret", namespace, name, exc) from None
        if secret is None:
            return None
        data = {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}
        for key, value in (secret.get("stringData") or {}).items():
            data.setdefault(key, str(value).encode())
        return data

    async def list_services(self, namespace: str) -> list[Mapping[str, Any]]:
        if self._services is not None and self._services.synced.is_set():
            prefix = f"{namespace}/"
            return [svc for key, svc in self._services.cache.items() if key.startswith(prefix)]
        try:
            return list(await resources.list_services(self._kube, namespace))
        except KubeError as exc:
            raise Transient(f"listing services in {namespace}: {exc.message}") from None


def _read_failed(kind: str, namespace: str, name: str, exc: KubeError) -> Exception:
    """What a failed read of a pod's ConfigMap/Secret means for the pod.

    403: RBAC does not let the service read in this namespace — not a hiccup (retrying at once
    changes nothing) and not the pod's fault for good (binding the namespace fixes it), so the
    pod waits like for a missing object, with a reason that says why. A 401 (the service's own
    credentials) and everything else stay ``Transient``."""
    if isinstance(exc, InvalidObjectName):  # translation checks names first; never a retry loop
        return InvalidRequest(f"{kind.lower()} reference: {exc.message}", reason="InvalidPodSpec")
    if isinstance(exc, KubeForbidden) and exc.status == 403:
        return MissingReference(
            f'reading {kind.lower()} "{name}" is forbidden: this virtual node does not serve '
            f"namespace {namespace} (its RBAC grants no reads there; docs/deploy.md, Namespaces)",
            reason=f"{kind}ReadForbidden",
        )
    return Transient(f"reading {kind.lower()} {namespace}/{name}: {exc.message}")
