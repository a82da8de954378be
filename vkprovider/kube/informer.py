"""List+watch into a local cache, relisting on 410 Gone, like client-go's reflector.

The cache maps ``namespace/name`` to the latest object. Handlers see every change with the
old and new object, so the controller can ignore status-only updates. ``synced`` is set after
the first complete list: work must not start before it (DESIGN §4.4).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from vkprovider.kube.client import JSON, KubeClient
from vkprovider.kube.errors import KubeError, KubeGone

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
        handler: Handler,
        watch_timeout_seconds: int = 300,
        retry_seconds: float = 1.0,
    ) -> None:
        self._kube = kube
        self._path = path
        self._field_selector = field_selector
        self._handler = handler
        self._watch_timeout = watch_timeout_seconds
        self._retry = retry_seconds
        self.cache: dict[str, JSON] = {}
        self.synced = asyncio.Event()
        self.relists = 0

    def get(self, key: str) -> JSON | None:
        return self.cache.get(key)

    async def run(self) -> None:
        """List, then watch from the list's resourceVersion; on 410 or a broken stream, relist."""
        resource_version = ""
        while True:
            try:
                if not resource_version:
                    resource_version = await self._relist()
                resource_version = await self._watch(resource_version)
            except KubeGone:
                log.info("watch of %s expired (410 Gone); relisting", self._path)
                resource_version = ""
            except KubeError as exc:
                log.warning("watch of %s failed: %s; retrying", self._path, exc)
                await asyncio.sleep(self._retry)

    async def _relist(self) -> str:
        query: dict[str, Any] = {"fieldSelector": self._field_selector} if self._field_selector else {}
        body = await self._kube.request("GET", self._path, query=query)
        self.relists += 1
        fresh = {object_key(item): item for item in body.get("items") or []}
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

    async def _watch(self, resource_version: str) -> str:
        query: dict[str, Any] = {
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": self._watch_timeout,
        }
        if self._field_selector:
            query["fieldSelector"] = self._field_selector
        async for event in self._kube.stream(self._path, query=query, timeout=self._watch_timeout + 30):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise KubeGone(410, str(obj.get("message", "")))
                raise KubeError(int(obj.get("code") or 0), str(obj.get("message", "watch error")))
            resource_version = str(obj.get("metadata", {}).get("resourceVersion") or resource_version)
            if kind == "BOOKMARK":
                continue
            key = object_key(obj)
            old = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
            else:
                self.cache[key] = obj
            self._handler(str(kind), old, obj)
        return resource_version
