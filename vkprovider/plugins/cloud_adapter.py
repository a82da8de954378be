"""The skeleton of a cloud adapter: the plumbing between the ``Provider`` contract and a cloud API.

Every adapter needs the same plumbing and, written by hand, each got part of it wrong in its
own way. :class:`CloudAdapter` implements ``info``, ``deploy``, ``get``, ``list``, ``delete``,
``endpoints`` and ``logs`` once; an adapter writes only its cloud's mapping:

* :meth:`~CloudAdapter.identity` — ``(pod UID, node)`` from the labels (tags, name, env) the
  cloud echoes back on an object, ``None`` for objects that are not ours;
* :meth:`~CloudAdapter.parse`, :meth:`~CloudAdapter.cloud_id`, :meth:`~CloudAdapter.status` —
  cloud object → the adapter's view of it → its id and ``DeploymentStatus``;
* :meth:`~CloudAdapter.fetch`, :meth:`~CloudAdapter.fetch_all` — read one object by cloud id
  (``NotFound`` if it is gone), read every object (optionally filtered by node on the server);
* :meth:`~CloudAdapter.create` — request → create body → the new deployment's status;
* :meth:`~CloudAdapter.remove` — delete one object by cloud id;
* optionally :meth:`~CloudAdapter.endpoints_of` (the ``endpoints`` capability),
  :meth:`~CloudAdapter.log_chunks` (the ``logs`` capability) and
  :meth:`~CloudAdapter.known_id` (clouds whose id is derived from the UID);
* the class attributes ``adapter``, ``version`` (for ``info``) and ``kind`` (for messages).

What the kit does with them:

* **Identity map** (pod UID → cloud id) is a cache, never the truth: the truth is the labels
  on the cloud's objects. After a restart the map is empty and is rebuilt from them — every
  ``list`` remembers what it saw, and a ``get`` that misses searches ``fetch_all``. A cached id
  whose object is gone, or now carries another UID, is dropped and searched again.
* **Per-UID serialisation**: ``deploy`` and ``delete`` of one UID run one at a time
  (:class:`~vkprovider.plugins.uid_locks.UidLocks`), so concurrent deploys make one deployment
  and a delete waits for a create in flight instead of missing the object it is making.
* **Find before create**: ``deploy`` of a UID that has a deployment returns its status. A
  cloud whose create is idempotent by UID and whose id is derived (``create_is_idempotent``
  with ``known_id``) skips the look-up: ``deploy`` creates and ``delete`` removes at once, one
  request each.
* **Delete tolerates NotFound**: an unknown UID, or an object gone between look-up and delete.
  ``delete`` answers True ("gone", no ``get`` needed) when ``remove`` did.
* **Unknown UID**: ``get``, ``endpoints`` and ``logs`` raise ``NotFound`` naming the provider.
* **Logs**: the deployment is found first, the adapter's chunks
  are cut at ``LogOptions.limit_bytes`` and the stream is closed as soon as the reader stops.
  Read them over :meth:`KeyedHttpClient.stream <vkprovider.plugins.http_client.KeyedHttpClient.stream>`,
  the client's bounded log-stream pool, so a follow never takes a connection that calls need.

The host (and the gRPC plugin server) reads "has a ``logs``/``endpoints`` method" as "can"
(``SupportsLogs``, ``SupportsEndpoints``), so an adapter has ``logs`` only if it writes
``log_chunks`` and ``endpoints`` only if it writes ``endpoints_of``: for the others the kit sets
them to ``None``, which is how a runtime-checkable protocol is told a method is absent.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, suppress
from typing import Any, Generic, TypeVar

from vkprovider.errors import NotFound
from vkprovider.models import (
    Capabilities,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    LogOptions,
    ProviderInfo,
)
from vkprovider.plugins.log_limit import limit_bytes
from vkprovider.plugins.uid_locks import UidLocks

__all__ = ["CloudAdapter"]

log = logging.getLogger(__name__)

V = TypeVar("V")


#: Capability method → the hook it is built on (see the module docstring).
_OPTIONAL = {"logs": "log_chunks", "endpoints": "endpoints_of"}


class CloudAdapter(ABC, Generic[V]):
    """``Provider`` over a cloud whose objects carry our labels, plus ``SupportsLogs`` and
    ``SupportsEndpoints`` when the adapter writes ``log_chunks`` and ``endpoints_of``.

    ``V`` is the adapter's parsed view of one cloud object (a pydantic model, a dict...).
    """

    #: What one deployment is called on this cloud, in messages ("RunPod pod").
    kind: str = "deployment"
    #: ``ProviderInfo.adapter`` and ``.version`` of the default ``info``.
    adapter: str = ""
    version: str = "0.1.0"
    #: The cloud's create is idempotent by pod UID (a second create of a UID returns the first
    #: deployment, e.g. its "already exists" answer read back) and ``known_id`` derives the id:
    #: then ``deploy`` calls ``create`` and ``delete`` calls ``remove(known_id(uid))`` at once,
    #: without the look-up request before each (``NotFound`` from ``remove`` is tolerated).
    create_is_idempotent: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for method, hook in _OPTIONAL.items():
            if method in cls.__dict__:
                continue  # the adapter wrote the capability method itself
            written = getattr(cls, hook) is not getattr(CloudAdapter, hook)
            setattr(cls, method, getattr(CloudAdapter, method) if written else None)

    def __init__(self, name: str) -> None:
        self._name = name
        self._ids: dict[str, str] = {}  # pod UID → cloud id; rebuilt from labels, see module doc
        self._locks = UidLocks()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        """Identity and capabilities, from ``adapter``, ``version`` and :meth:`capabilities`."""
        return ProviderInfo(
            name=self._name, adapter=self.adapter, version=self.version, capabilities=self.capabilities()
        )

    def capabilities(self) -> Capabilities:
        """``logs`` and ``endpoints`` exactly when the adapter has those methods (writes their
        hooks), so the declaration cannot disagree with the methods. Override to declare more
        (``rate_limit``, ``watch`` …) or fewer (a setting that turns logs off)."""
        return Capabilities(logs=self.logs is not None, endpoints=self.endpoints is not None)

    # ---- the cloud's mapping: what an adapter writes ----------------------------------------

    @abstractmethod
    def identity(self, raw: Any) -> tuple[str, str] | None:
        """``(uid, node_name)`` of a raw cloud object we created, else ``None``; never raises."""

    @abstractmethod
    def parse(self, raw: Any) -> V:
        """One raw object of ours → the adapter's view; malformed → ``Transient`` (``parse_model``)."""

    @abstractmethod
    def cloud_id(self, view: V) -> str:
        """The cloud's id of the object (what ``fetch`` and ``remove`` take)."""

    @abstractmethod
    def status(self, view: V) -> DeploymentStatus:
        """The object as a ``DeploymentStatus``; its ``provider_id`` is ``cloud_id(view)`` unless
        ``known_id`` derives the id (then it may be any stable name, e.g. ``namespace/name``)."""

    @abstractmethod
    async def fetch(self, cloud_id: str) -> Any:
        """One raw object by id; ``NotFound`` if the cloud has no such object."""

    @abstractmethod
    async def fetch_all(self, node_name: str | None) -> Sequence[Any]:
        """Raw objects of the account; with ``node_name``, a cloud that can filter by label on
        the server may return only that node's (the kit filters by ``identity`` either way)."""

    @abstractmethod
    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        """Create the deployment (refuse unsupported input before any call); its status, whose
        ``provider_id`` the kit remembers as the UID's cloud id.

        Called under the UID's lock, only when no deployment for the UID was found — or, with
        ``create_is_idempotent``, on every ``deploy`` (it must then return the existing one)."""

    @abstractmethod
    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> bool | None:
        """Delete one object by id (``NotFound`` is tolerated by the kit). True only when the
        cloud's answer says it is gone (``delete`` passes it on: no ``get`` to confirm)."""

    def known_id(self, uid: str) -> str | None:
        """The cloud id if it is derived from the UID (a deterministic name), else ``None``.

        With a derived id there is no search: an object missing under it does not exist."""
        return None

    async def endpoints_of(self, uid: str, view: V) -> DeploymentEndpoints:
        """How a client reaches the deployment (``capabilities.endpoints``). Write it to offer
        ``endpoints``."""
        raise NotImplementedError

    def log_chunks(self, uid: str, view: V, options: LogOptions) -> AsyncIterator[bytes]:
        """The deployment's log bytes (``capabilities.logs``), read over the client's
        log-stream pool; ``limit_bytes`` and closing are the kit's. Write it to offer ``logs``."""
        raise NotImplementedError

    # ---- the Provider contract, once --------------------------------------------------------

    def _direct_id(self, uid: str) -> str | None:
        """The id to create/remove at once (``create_is_idempotent``), else None: look up first."""
        return self.known_id(uid) if self.create_is_idempotent else None

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        async with self._locks.lock(request.uid):
            if self._direct_id(request.uid) is None:
                try:
                    return self.status(await self.find(request.uid))
                except NotFound:
                    pass
            status = await self.create(request)
            self._remember(request.uid, status.provider_id)
            log.info(
                "provider %s: created %s %s for uid %s",
                self._name,
                self.kind,
                status.provider_id,
                request.uid,
            )
            return status

    async def get(self, uid: str) -> DeploymentStatus:
        return self.status(await self.find(uid))

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        return await self.endpoints_of(uid, await self.find(uid))

    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        view = await self.find(uid)
        chunks = limit_bytes(self.log_chunks(uid, view, options), options.limit_bytes)
        async with aclosing(chunks):  # type: ignore[type-var]  # an async generator: it has aclose
            async for chunk in chunks:
                yield chunk

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        statuses: list[DeploymentStatus] = []
        for raw in await self.fetch_all(node_name):
            found = self.identity(raw)
            if found is None or found[1] != node_name:
                continue
            view = self.parse(raw)
            self._remember(found[0], self.cloud_id(view))
            statuses.append(self.status(view))
        return statuses

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> bool | None:
        async with self._locks.lock(uid):
            cloud_id = self._direct_id(uid)
            if cloud_id is None:
                try:
                    cloud_id = self.cloud_id(await self.find(uid))
                except NotFound:
                    return None
            gone: bool | None = None
            with suppress(NotFound):  # gone between the look-up and the call: deleted all the same
                gone = await self.remove(cloud_id, grace_period_seconds)
            self._ids.pop(uid, None)
            log.info("provider %s: deleted %s %s for uid %s", self._name, self.kind, cloud_id, uid)
            return True if gone is True else None

    async def find(self, uid: str) -> V:
        """The object of ``uid``: by its known or cached id, else by searching; ``NotFound``."""
        derived = self.known_id(uid)
        cloud_id = derived if derived is not None else self._ids.get(uid)
        if cloud_id is not None:
            try:
                raw = await self.fetch(cloud_id)
            except NotFound:
                raw = None
            found = self.identity(raw) if raw is not None else None
            if found is not None and found[0] == uid:
                return self.parse(raw)
            self._ids.pop(uid, None)
            if derived is not None:
                raise NotFound(f"no {self.kind} for uid {uid}", provider=self._name)
        for raw in await self.fetch_all(None):
            found = self.identity(raw)
            if found is not None and found[0] == uid:
                view = self.parse(raw)
                self._remember(uid, self.cloud_id(view))
                return view
        raise NotFound(f"no {self.kind} for uid {uid}", provider=self._name)

    def _remember(self, uid: str, cloud_id: str) -> None:
        if self.known_id(uid) is None and cloud_id:
            self._ids[uid] = cloud_id
