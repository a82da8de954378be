"""One ``asyncio.Lock`` per pod UID, so concurrent ``deploy`` calls for one UID create one deployment.

``deploy`` must be idempotent on the UID: the usual shape is "look it up, create it if missing",
which two concurrent calls would both pass. Holding ``locks.lock(uid)`` around that sequence
serialises calls for the same UID while other UIDs proceed; ``discard(uid)`` forgets the lock once
the deployment is deleted, so the registry does not grow with every pod ever deployed.
"""

from __future__ import annotations

import asyncio

__all__ = ["UidLocks"]


class UidLocks:
    """A registry of per-UID locks (single event loop, like the adapter that owns it)."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, uid: str) -> asyncio.Lock:
        """The lock for ``uid``, created on first use; the same object until ``discard(uid)``."""
        return self._locks.setdefault(uid, asyncio.Lock())

    def discard(self, uid: str) -> None:
        """Forget the lock for ``uid`` (after its deployment is deleted); unknown UIDs are fine."""
        self._locks.pop(uid, None)

    def __len__(self) -> int:
        return len(self._locks)
