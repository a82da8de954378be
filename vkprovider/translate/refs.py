"""ConfigMap/Secret lookups with the kubelet's optional/mandatory semantics and Event reasons.

One ``RefResolver`` serves one pod translation: it caches each object (the kubelet does the same
per pod) and collects warnings. Messages name the object and where it was referenced, never a
value.
"""

from __future__ import annotations

from vkprovider.translate._fields import invalid
from vkprovider.translate.names import is_dns_subdomain
from vkprovider.translate.types import MissingReference, ObjectSource, TranslationEvent

_KINDS = {"configmap": ("ConfigMap", "configmap"), "secret": ("Secret", "secret")}


def _readable(name: str, where: str) -> None:
    """The last line before a read: only a DNS-1123 name ever reaches ``ObjectSource`` (the
    callers check first and name the field; this holds if one ever forgets)."""
    if not is_dns_subdomain(name):
        raise invalid(where, f"{name[:80]!r} is not a valid object name")


def _as_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class RefResolver:
    def __init__(self, source: ObjectSource, namespace: str) -> None:
        self._source = source
        self._namespace = namespace
        self._config_maps: dict[str, dict[str, str] | None] = {}
        self._secrets: dict[str, dict[str, bytes] | None] = {}
        self.warnings: list[TranslationEvent] = []

    def miss(self, kind: str, what: str, optional: bool, message: str) -> None:
        """Record an optional miss as a warning, or raise for a mandatory one."""
        title, _ = _KINDS[kind]
        if optional:
            self.warnings.append(TranslationEvent(f"Optional{title}{what}", message))
            return
        raise MissingReference(message, reason=f"Mandatory{title}{what}")

    async def config_map(self, name: str, *, optional: bool, where: str) -> dict[str, str] | None:
        if name not in self._config_maps:
            _readable(name, where)
            data = await self._source.get_config_map(self._namespace, name)
            self._config_maps[name] = None if data is None else {str(k): str(v) for k, v in data.items()}
        data = self._config_maps[name]
        if data is None:
            self.miss("configmap", "NotFound", optional, f'configmap "{name}" not found ({where})')
        return data

    async def peek_secret(self, name: str) -> dict[str, bytes] | None:
        """The secret's data, or ``None``, without recording anything."""
        if name not in self._secrets:
            _readable(name, "secret reference")
            data = await self._source.get_secret(self._namespace, name)
            self._secrets[name] = None if data is None else {str(k): _as_bytes(v) for k, v in data.items()}
        return self._secrets[name]

    async def secret(self, name: str, *, optional: bool, where: str) -> dict[str, bytes] | None:
        data = await self.peek_secret(name)
        if data is None:
            self.miss("secret", "NotFound", optional, f'secret "{name}" not found ({where})')
        return data

    async def config_map_key(self, name: str, key: str, *, optional: bool, where: str) -> str | None:
        data = await self.config_map(name, optional=optional, where=where)
        if data is None:
            return None
        if key not in data:
            self.miss(
                "configmap", "KeyNotFound", optional, f'key "{key}" not found in configmap "{name}" ({where})'
            )
            return None
        return data[key]

    async def secret_key(self, name: str, key: str, *, optional: bool, where: str) -> bytes | None:
        data = await self.secret(name, optional=optional, where=where)
        if data is None:
            return None
        if key not in data:
            self.miss(
                "secret", "KeyNotFound", optional, f'key "{key}" not found in secret "{name}" ({where})'
            )
            return None
        return data[key]
