"""Temporary blocks on (provider, GPU type, region) after a ``NoCapacity``.

Scoped like SkyPilot's blocked resources: running out of one shape in one region says nothing
about the provider's other shapes or regions, so only that triple is skipped, and only for a
TTL, because capacity comes back. Entries expire lazily; the clock is injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from vkprovider.gpus import normalize_gpu

BlockKey = tuple[str, str, str]  # (provider, normalized GPU type, region)


@dataclass(frozen=True, slots=True)
class BlockEntry:
    provider: str
    gpu_type: str
    region: str
    expires_at: float
    reason: str


def block_key(provider: str, gpu_type: str, region: str) -> BlockKey:
    return (provider, normalize_gpu(gpu_type), region)


class Blocklist:
    def __init__(self, ttl_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl_seconds
        self._clock = clock
        self._entries: dict[BlockKey, BlockEntry] = {}

    def add(self, provider: str, gpu_type: str, region: str, reason: str, ttl: float | None = None) -> None:
        key = block_key(provider, gpu_type, region)
        expires = self._clock() + (self.ttl if ttl is None else ttl)
        self._entries[key] = BlockEntry(key[0], key[1], key[2], expires, reason)

    def is_blocked(self, key: BlockKey, now: float | None = None) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return False
        if entry.expires_at <= (self._clock() if now is None else now):
            del self._entries[key]
            return False
        return True

    def active(self, now: float | None = None) -> dict[BlockKey, BlockEntry]:
        """Unexpired entries (prunes the rest); the ranker takes this once per decision."""
        if not self._entries:
            return self._entries
        now = self._clock() if now is None else now
        expired = [k for k, e in self._entries.items() if e.expires_at <= now]
        for key in expired:
            del self._entries[key]
        return self._entries

    def remove(self, provider: str, gpu_type: str | None = None, region: str | None = None) -> int:
        """Operator escape hatch: drop entries of a provider (optionally one GPU type/region)."""
        doomed = [
            k
            for k in self._entries
            if k[0] == provider
            and (gpu_type is None or k[1] == normalize_gpu(gpu_type))
            and (region is None or k[2] == region)
        ]
        for key in doomed:
            del self._entries[key]
        return len(doomed)

    def entries(self) -> list[BlockEntry]:
        return sorted(self.active().values(), key=lambda e: (e.provider, e.gpu_type, e.region))

    def __len__(self) -> int:
        return len(self.active())
