"""The translation boundary: what it reads (``ObjectSource``) and what it returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from vkprovider.errors import InvalidRequest
from vkprovider.models import DeploymentRequest

GPU_RESOURCE = "nvidia.com/gpu"


class ObjectSource(Protocol):
    """Read access to the objects a pod refers to, in the pod's namespace.

    The pod controller implements it against the API server (with its informer caches); tests use
    a dict. ``None`` means "does not exist"; any other failure should raise (e.g. ``Transient``) so
    the pod is retried rather than failed.
    """

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's ``data`` (``binaryData`` may be folded in, decoded where sensible)."""
        ...

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        """The Secret's data, base64-decoded."""
        ...

    async def list_services(self, namespace: str) -> list[Mapping[str, Any]]:
        """Services in the namespace as raw API JSON, for service-link environment variables."""
        ...


class MissingReference(InvalidRequest):
    """A mandatory ConfigMap/Secret (or one of its keys) does not exist *yet*.

    Unlike other ``InvalidRequest`` errors this is not final: the kubelet keeps such a pod
    Pending (``CreateContainerConfigError``) and retries, so it starts once the object exists.
    ``reason`` is the kubelet's Event reason (``MandatorySecretNotFound`` …).
    """


@dataclass(frozen=True)
class TranslationEvent:
    """A non-fatal finding, to be recorded as a Warning Event on the pod (kubelet reasons)."""

    reason: str
    message: str


@dataclass
class Translation:
    request: DeploymentRequest
    warnings: list[TranslationEvent] = field(default_factory=list)
