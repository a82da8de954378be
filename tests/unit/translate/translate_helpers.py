"""Test helpers for translation: a dict-backed ObjectSource and a base pod (unique module name so
it can be imported from tests without clashing with other directories' conftest modules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DictSource:
    """``ObjectSource`` over plain dicts; records every lookup so tests can assert caching."""

    def __init__(
        self,
        config_maps: dict[str, dict[str, str]] | None = None,
        secrets: dict[str, dict[str, bytes]] | None = None,
        services: list[Mapping[str, Any]] | None = None,
    ) -> None:
        self.config_maps = config_maps or {}
        self.secrets = secrets or {}
        self.services = services or []
        self.calls: list[tuple[str, str, str]] = []

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        self.calls.append(("configmap", namespace, name))
        return self.config_maps.get(name)

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        self.calls.append(("secret", namespace, name))
        return self.secrets.get(name)

    async def list_services(self, namespace: str) -> list[Mapping[str, Any]]:
        self.calls.append(("services", namespace, ""))
        return self.services


BASE_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "llm-0",
        "namespace": "serving",
        "uid": "0b9c7a1e-1111-2222-3333-444455556666",
        "labels": {"app": "llm", "tier": "gpu"},
        "annotations": {"team": "inference"},
    },
    "spec": {
        "nodeName": "vk-external",
        "serviceAccountName": "llm-sa",
        "containers": [
            {
                "name": "server",
                "image": "ghcr.io/acme/llm:1.2",
                "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2", "memory": "8Gi"}},
            }
        ],
    },
    "status": {"phase": "Pending"},
}
