"""List+watch into a local cache, relisting on 410 Gone, like client-go's reflector.

The cache maps ``namespace/name`` to the latest object. Handlers see every change with the
old and new object, so the controller can ignore status-only updates. ``synced`` is set after
the first complete list: work must not start before it (DESIGN §4.4).

A broken stream (apiserver restart, dropped connection: ``KubeUnavailable``) is re-opened with
backoff from the last resourceVersion seen, so nothing is replayed or missed; when that version
is too old (410) it relists. One informer serves one watch of one leadership term: build a new
one for a new term, never reuse a cache that was synced before.

Built for 10,000 objects: the list is read in pages (``page_size``, 500 like client-go's
reflector; every page is of the same snapshot, and an expired continue token is a 410 that
relists), the cached objects drop ``metadata.managedFields`` (nobody here reads them, and
they are a third of a pod's size: client-go users strip them with a transform for the same
reason) and share their repeated strings (``_Shared``): 17 KB of Python objects per pod
become ~8 KB.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeError, KubeGone
from vkprovider.retry import Backoff

log = logging.getLogger(__name__)

#: (event type "ADDED"/"MODIFIED"/"DELETED", old object or None, new object)
Handler = Callable[[str, JSON | None, JSON], None]


def object_key(obj: JSON) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class Informer:
    def __init__(
        self,
        kube: KubeClient,
        path: str,
        *,
        field_selector: str = "",
        label_selector: str = "",
        handler: Handler,
        watch_timeout_seconds: int = 300,
        retry_seconds: float = 1.0,
        retry_max_seconds: float = 30.0,
        page_size: int = 500,
    ) -> None:
        self._kube = kube
        self._path = path
        self._field_selector = field_selector
        self._label_selector = label_selector
        self._handler = handler
        self._watch_timeout = watch_timeout_seconds
        self._page_size = page_size
        self._backoff = Backoff(base=retry_seconds, cap=retry_max_seconds, jitter=retry_seconds / 2)
        self._resource_version = ""
        self.cache: dict[str, JSON] = {}
        self.synced = asyncio.Event()
        self.relists = 0
        self.reconnects = 0  #: watches re-opened after a transport or server error

    def _selectors(self) -> dict[str, Any]:
        query: dict[str, Any] = {}
        if self._field_selector:
            query["fieldSelector"] = self._field_selector
        if self._label_selector:
            query["labelSelector"] = self._label_selector
        return query

    def get(self, key: str) -> JSON | None:
        return self.cache.get(key)

    async def run(self) -> None:
        """List, then watch from the list's resourceVersion; on 410 or a broken stream, relist."""
        while True:
            try:
                if not self._resource_version:
                    self._resource_version = await self._relist()
                    self._backoff.reset()
                await self._watch(self._resource_version)
            except KubeGone:
                log.info("watch of %s expired (410 Gone); relisting", self._path)
                self._resource_version = ""
            except KubeError as exc:
                self.reconnects += 1
                delay = self._backoff.next()
                log.warning("watch of %s failed: %s; retrying in %.1fs", self._path, exc, delay)
                await asyncio.sleep(delay)

    async def _relist(self) -> str:
        query: dict[str, Any] = self._selectors()
        fresh: dict[str, JSON] = {}
        while True:
            body = await self._kube.request("GET", self._path, query={**query, "limit": self._page_size})
            for item in body.get("items") or []:
                key = object_key(item)
                fresh[key] = _lean(item, self.cache.get(key))
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                break
            query["continue"] = token
        self.relists += 1
        for key, old in list(self.cache.items()):
            if key not in fresh:
                del self.cache[key]
                self._handler("DELETED", old, old)
        for key, item in fresh.items():
            previous = self.cache.get(key)
            self.cache[key] = item
            if previous is None:
                self._handler("ADDED", None, item)
            elif previous["metadata"].get("resourceVersion") != item["metadata"].get("resourceVersion"):
                self._handler("MODIFIED", previous, item)
        self.synced.set()
        return str(body["metadata"]["resourceVersion"])

    async def _watch(self, resource_version: str) -> None:
        """Follow the watch; ``self._resource_version`` advances with every event, so a stream
        cut mid-way resumes where it stopped."""
        query: dict[str, Any] = {
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": self._watch_timeout,
        }
        query.update(self._selectors())
        async for event in self._kube.stream(self._path, query=query, timeout=self._watch_timeout + 30):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise KubeGone(410, str(obj.get("message", "")))
                raise KubeError(int(obj.get("code") or 0), str(obj.get("message", "watch error")))
            version = str(obj.get("metadata", {}).get("resourceVersion") or "")
            if kind == "BOOKMARK":
                self._resource_version = version or self._resource_version
                continue
            key = object_key(obj)
            old = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
            else:
                obj = self.cache[key] = _lean(obj, old)
            self._handler(str(kind), old, obj)
            self._resource_version = version or self._resource_version
            self._backoff.reset()


class _Shared:
    """One copy of each string the cached objects repeat (field names, "True", images, node
    and namespace names, timestamps of the same second): a JSON-decoded pod is ~17 KB of Python
    objects, half of it the same strings over and over. Bounded: the table starts afresh when
    full (objects keep the strings they have), so unique values (UIDs, resourceVersions) never
    pile up.

    A new version of a cached object (MODIFIED, or a relist) mostly repeats the previous one:
    its spec, labels, owner references, conditions that did not change. ``share(value,
    previous)`` takes those parts from the previous version as they are (compared at C speed,
    already shared) and walks only what changed, so an update costs a fraction of a first sight
    and versions of one object share their unchanged parts. Equal by ``==`` is JSON-equal for
    an API object (its fields have one type each: a field never turns from ``true`` to ``1``)."""

    def __init__(self, limit: int = 100_000) -> None:
        self._strings: dict[str, str] = {}
        self._one = self._strings.setdefault  #: the one copy of a string (C speed: no call per string)
        self._limit = limit

    def share(self, value: Any, previous: Any = None) -> Any:
        if len(self._strings) >= self._limit:
            self._strings.clear()  # checked per object: the table may pass the limit by one object
        if type(previous) is dict and type(value) is dict:
            return self._update(value, previous)
        return self._walk(value)

    def _update(self, value: JSON, previous: JSON) -> JSON:
        """``value`` with the parts equal to ``previous``'s taken from it, the rest walked."""
        one, walk, update = self._one, self._walk, self._update
        out: JSON = {}
        for k, v in value.items():
            kind = type(v)
            if kind is str:
                out[one(k, k)] = one(v, v)
            elif kind is dict or kind is list:
                before = previous.get(k)
                if before == v:
                    out[one(k, k)] = before
                elif kind is dict and type(before) is dict:
                    out[one(k, k)] = update(v, before)
                else:
                    out[one(k, k)] = walk(v)
            else:
                out[one(k, k)] = v
        return out

    def _walk(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._one(value, value)
        if kind is dict:
            one, walk = self._one, self._walk
            return {
                one(k, k): one(v, v) if type(v) is str else walk(v) if type(v) in _NESTED else v
                for k, v in value.items()
            }
        if kind is list:
            return [self._walk(v) for v in value]
        return value


_NESTED = (dict, list)
_SHARED = _Shared()


def _lean(obj: JSON, previous: JSON | None = None) -> JSON:
    """The object as cached: without ``metadata.managedFields``, its strings shared, and the
    parts equal to ``previous`` (the cached version it replaces) taken from it (see the module
    docstring and ``_Shared``)."""
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    shared: JSON = _SHARED.share(obj, previous)
    return shared
