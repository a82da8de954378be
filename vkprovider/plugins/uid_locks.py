"""One ``asyncio.Lock`` per pod UID, so concurrent ``deploy`` calls for one UID create one deployment.

``deploy`` must be idempotent on the UID: the usual shape is "look it up, create it if missing",
which two concurrent calls would both pass. ``async with locks.lock(uid):`` around that sequence
serialises calls for the same UID while other UIDs proceed. A UID's lock exists only while
someone holds or waits for it: the last one out removes it, so the registry holds the UIDs in
flight, not every pod ever deployed (a deploy that failed, or a pod deleted through another path,
used to leave its lock behind for the life of the process).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["UidLocks"]


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # holders and waiters


class _Held:
    """``async with``: count in, take the UID's lock; release, count out, drop it when unused."""

    __slots__ = ("_entry", "_owner", "_uid")

    def __init__(self, owner: UidLocks, uid: str) -> None:
        self._owner, self._uid = owner, uid
        self._entry: _Entry | None = None

    async def __aenter__(self) -> None:
        entry = self._owner._entries.get(self._uid)
        if entry is None:
            entry = self._owner._entries[self._uid] = _Entry()
        entry.users += 1
        try:
            await entry.lock.acquire()
        except BaseException:  # cancelled while waiting: count out, never leave the entry behind
            self._owner._leave(self._uid, entry)
            raise
        self._entry = entry

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        entry, self._entry = self._entry, None
        assert entry is not None
        entry.lock.release()
        self._owner._leave(self._uid, entry)


class UidLocks:
    """A registry of per-UID locks (single event loop, like the adapter that owns it)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def lock(self, uid: str) -> _Held:
        """``async with locks.lock(uid):`` — exclusive for ``uid`` until the block ends."""
        return _Held(self, uid)

    def locked(self, uid: str) -> bool:
        entry = self._entries.get(uid)
        return entry is not None and entry.lock.locked()

    def discard(self, uid: str) -> None:
        """Kept for adapters written against the old API: locks now go by themselves."""

    def _leave(self, uid: str, entry: _Entry) -> None:
        entry.users -= 1
        if entry.users == 0 and self._entries.get(uid) is entry:
            del self._entries[uid]

    def __len__(self) -> int:
        return len(self._entries)
