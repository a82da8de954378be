"""A thin guard around every provider: adapter bugs become ``Transient``, never a crashed service.

Adapters are third-party code. The guard checks what they return (types, phases, the UID asked
for, node scoping of ``list``, size) and turns anything unexpected, including a bare exception,
into a logged ``Transient`` naming the provider, so the pod is retried instead of the service
dying. ``ProviderError`` subclasses pass through unchanged (with the provider name filled in).
Cancellation is never swallowed. Being the one place every adapter call passes, it also records
each call's latency and error class (``vkprovider.metrics``), and scrubs the secret values of
each pod's request out of error and status messages (``vkprovider.plugins.scrub``) before they
reach logs, Events, pod status or ``/state``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from prometheus_client import Histogram
from pydantic import BaseModel

from vkprovider.errors import ProviderError, Transient
from vkprovider.metrics import PROVIDER_CALL_ERRORS, PROVIDER_CALL_SECONDS, prepare_provider
from vkprovider.models import (
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    DeploymentUsage,
    LogOptions,
    Offer,
    Phase,
    ProviderInfo,
)
from vkprovider.plugins.api import Provider, SupportsEndpoints, SupportsLogs, SupportsMetrics, SupportsWatch
from vkprovider.plugins.scrub import SecretBook

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Largest accepted serialized status/info/offer and log chunk (gRPC's default message limit).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
LOG_CHUNK_BYTES = 1024 * 1024
#: deploy errors after which the provider holds nothing of the pod (its secrets can be retired)
_NOTHING_CREATED = frozenset({"InvalidRequest", "NoCapacity", "QuotaOrBilling"})


class AdapterBug(Exception):
    """A reply that breaks the contract; reported as ``Transient``."""


def _check_size(model: BaseModel, what: str) -> None:
    size = len(model.__pydantic_serializer__.to_json(model))
    if size > MAX_MESSAGE_BYTES:
        raise AdapterBug(f"{what} is oversized ({size} bytes > {MAX_MESSAGE_BYTES})")


class Validated:
    """Fingerprints of the statuses that passed ``check_status``, kept for one list round.

    A fingerprint is the status's field values plus a copy (a tuple) of its mutable fields,
    the ``containers`` list and the carried endpoints' lists, so a status equal to one that
    passed is recognised and the same object changed in place since is not; ``roll`` after each
    list keeps only what that list returned (the memory is the last list's)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[object, ...]] = {}
        self._current: dict[str, tuple[object, ...]] = {}

    @staticmethod
    def fingerprint(status: DeploymentStatus) -> tuple[object, ...]:
        endpoints = status.endpoints
        carried = (tuple(endpoints.addresses), tuple(endpoints.ports)) if endpoints is not None else ()
        return (type(status), *status.__dict__.values(), tuple(status.containers), *carried)

    def seen(self, status: DeploymentStatus, fingerprint: tuple[object, ...]) -> bool:
        return self._last.get(status.uid) == fingerprint or self._current.get(status.uid) == fingerprint

    def add(self, status: DeploymentStatus, fingerprint: tuple[object, ...]) -> None:
        self._current[status.uid] = fingerprint

    def roll(self) -> None:
        self._last, self._current = self._current, {}


def check_status(
    status: object,
    *,
    uid: str | None = None,
    node_name: str | None = None,
    validated: Validated | None = None,
) -> DeploymentStatus:
    """Return ``status`` if it is a valid ``DeploymentStatus`` (for ``uid``/``node_name``), else raise.

    With ``validated`` (the guard's list round), a status whose fields equal one that passed in
    the previous list skips the size check, the one costly part (it serialises the status): an
    idle poll of N deployments costs N tuple comparisons and serialises only what changed. Every
    status, changed or not, still gets the type, phase, UID and node checks."""
    if not isinstance(status, DeploymentStatus):
        raise AdapterBug(f"expected DeploymentStatus, got {type(status).__name__}")
    if not isinstance(status.phase, Phase):
        raise AdapterBug(f"deployment {status.uid!r}: unknown phase {status.phase!r}")
    if uid is not None and status.uid != uid:
        raise AdapterBug(f"asked for uid {uid!r}, got status for {status.uid!r}")
    if status.endpoints is not None and status.endpoints.uid != status.uid:
        raise AdapterBug(f"status of {status.uid!r} carries the endpoints of {status.endpoints.uid!r}")
    if node_name is not None and status.node_name and status.node_name != node_name:
        raise AdapterBug(
            f"list/watch for node {node_name!r} returned {status.uid!r} of node {status.node_name!r}"
        )
    if validated is None:
        _check_size(status, f"status of {status.uid!r}")
        return status
    fingerprint = validated.fingerprint(status)
    if not validated.seen(status, fingerprint):
        _check_size(status, f"status of {status.uid!r}")
    validated.add(status, fingerprint)
    return status


class GuardedProvider:
    """Wraps a :class:`Provider`; see the module docstring."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self._name = inner.name
        self._seconds: dict[str, Histogram] = {}  #: per call: the labelled child, looked up once
        prepare_provider(self._name)
        #: what the last list returned, checked (an idle poll does not serialise it again)
        self._validated = Validated()
        #: per pod UID, the secret values of its request, kept out of every message
        self.secrets = SecretBook()

    @property
    def name(self) -> str:
        return self._name

    async def _call(self, op: str, call: Awaitable[T], uid: str | None = None) -> T:
        """Await ``call``; errors scrubbed with ``uid``'s secrets (every pod's for ``None``)."""
        started = time.perf_counter()
        unchained: Transient | None = None  # raised after the handler: no __context__ to leak
        try:
            return await call
        except ProviderError as exc:
            if exc.provider is None:
                exc.provider = self._name
            self.secrets.error(exc, uid)
            self._failed(op, exc.code)
            raise
        except asyncio.CancelledError:  # a caller's timeout (or shutdown): a hung provider shows
            self._failed(op, "Cancelled")
            raise
        except Exception as exc:
            if self._holds_secret(exc, uid):
                unchained = self._bug(op, exc, uid)
            else:
                raise self._bug(op, exc, uid) from exc
        finally:
            seconds = self._seconds.get(op)
            if seconds is None:
                seconds = self._seconds[op] = PROVIDER_CALL_SECONDS.labels(self._name, op)
            seconds.observe(time.perf_counter() - started)
        raise unchained

    def _failed(self, op: str, error: str) -> None:
        PROVIDER_CALL_ERRORS.labels(self._name, op, error).inc()

    def _holds_secret(self, exc: Exception, uid: str | None) -> bool:
        """Whether ``exc``'s text holds a secret value: then it is not chained to what we raise
        (a logged traceback, or anything walking ``__cause__``/``__context__``, would print it)."""
        text = str(exc)
        return self.secrets.scrubber(uid)(text) != text

    def _bug(self, op: str, exc: Exception, uid: str | None = None) -> Transient:
        """The ``Transient`` for a contract breach (the adapter's text scrubbed)."""
        self._failed(op, "AdapterBug")
        kind = "malformed reply" if isinstance(exc, AdapterBug) else f"unexpected {type(exc).__name__}"
        text = self.secrets.scrubber(uid)(str(exc))
        log.error("provider %s: %s in %s: %s", self._name, kind, op, text, extra={"provider": self._name})
        return Transient(f"adapter error in {op}: {kind}: {text}", provider=self._name)

    async def info(self) -> ProviderInfo:
        info = await self._call("info", self.inner.info())
        try:
            if not isinstance(info, ProviderInfo):
                raise AdapterBug(f"expected ProviderInfo, got {type(info).__name__}")
            _check_size(info, "info")
        except AdapterBug as exc:
            raise self._bug("info", exc) from exc
        return info

    async def probe(self) -> None:
        await self._call("probe", self.inner.probe())

    async def offers(self) -> list[Offer]:
        offers = await self._call("offers", self.inner.offers())
        try:
            if not isinstance(offers, list) or not all(isinstance(o, Offer) for o in offers):
                raise AdapterBug("offers() must return a list of Offer")
            total = sum(len(o.__pydantic_serializer__.to_json(o)) for o in offers)
            if total > MAX_MESSAGE_BYTES:
                raise AdapterBug(f"catalog is oversized ({total} bytes)")
        except AdapterBug as exc:
            raise self._bug("offers", exc) from exc
        return offers

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        self.secrets.remember(request)  # first: an error of this very call may echo them
        try:
            status = await self._call("deploy", self.inner.deploy(request), request.uid)
        except ProviderError as exc:
            if exc.code in _NOTHING_CREATED:  # kept until a list shows nothing of it either
                self.secrets.retire(request.uid)
            raise
        return self._checked("deploy", status, uid=request.uid)

    async def get(self, uid: str) -> DeploymentStatus:
        try:
            status = await self._call("get", self.inner.get(uid), uid)
        except ProviderError as exc:
            if exc.code == "NotFound":
                self.secrets.retire(uid)
            raise
        return self._checked("get", status, uid=uid)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        statuses = await self._call("list", self.inner.list(node_name))
        if not isinstance(statuses, list):
            raise self._bug("list", AdapterBug(f"expected a list, got {type(statuses).__name__}"))
        checked = [self._checked("list", s, node_name=node_name, validated=self._validated) for s in statuses]
        self._validated.roll()
        self.secrets.listed(s.uid for s in checked)
        return checked

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> bool | None:
        """True only if the adapter said True (gone); any other answer is "confirm with get"."""
        if grace_period_seconds is None:  # adapters written before the grace period keep working
            gone = await self._call("delete", self.inner.delete(uid), uid)
        else:
            gone = await self._call(
                "delete", self.inner.delete(uid, grace_period_seconds=grace_period_seconds), uid
            )
        self.secrets.retire(uid)
        return True if gone is True else None

    async def close(self) -> None:
        await self._call("close", self.inner.close())

    def _checked(
        self,
        op: str,
        status: object,
        *,
        uid: str | None = None,
        node_name: str | None = None,
        validated: Validated | None = None,
    ) -> DeploymentStatus:
        try:
            checked = check_status(status, uid=uid, node_name=node_name, validated=validated)
        except AdapterBug as exc:
            raise self._bug(op, exc, uid) from exc
        return self.secrets.status(checked)

    async def _stream(self, op: str, stream: AsyncIterator[T], uid: str | None = None) -> AsyncIterator[T]:
        iterator = aiter(stream)
        try:
            while True:
                unchained: Transient | None = None
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
                except ProviderError as exc:
                    if exc.provider is None:
                        exc.provider = self._name
                    self.secrets.error(exc, uid)
                    self._failed(op, exc.code)
                    raise
                except Exception as exc:
                    if not self._holds_secret(exc, uid):
                        raise self._bug(op, exc, uid) from exc
                    unchained = self._bug(op, exc, uid)
                if unchained is not None:
                    raise unchained
                yield item
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()


class _LogsMixin(GuardedProvider):
    async def logs(self, uid: str, options: LogOptions) -> AsyncIterator[bytes]:
        assert isinstance(self.inner, SupportsLogs)
        async for chunk in self._stream("logs", self.inner.logs(uid, options), uid):
            if not isinstance(chunk, bytes):
                raise self._bug("logs", AdapterBug(f"log chunk must be bytes, got {type(chunk).__name__}"))
            for start in range(0, len(chunk), LOG_CHUNK_BYTES):
                yield chunk[start : start + LOG_CHUNK_BYTES]


class _WatchMixin(GuardedProvider):
    async def watch(self, node_name: str) -> AsyncIterator[DeploymentStatus]:
        assert isinstance(self.inner, SupportsWatch)
        async for status in self._stream("watch", self.inner.watch(node_name)):
            yield self._checked("watch", status, node_name=node_name)


class _MetricsMixin(GuardedProvider):
    async def usage(self, node_name: str) -> list[DeploymentUsage]:
        assert isinstance(self.inner, SupportsMetrics)
        usage = await self._call("usage", self.inner.usage(node_name))
        if not isinstance(usage, list) or not all(isinstance(u, DeploymentUsage) for u in usage):
            raise self._bug("usage", AdapterBug("usage() must return a list of DeploymentUsage"))
        return usage


class _EndpointsMixin(GuardedProvider):
    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        assert isinstance(self.inner, SupportsEndpoints)
        endpoints = await self._call("endpoints", self.inner.endpoints(uid))
        if not isinstance(endpoints, DeploymentEndpoints) or endpoints.uid != uid:
            raise self._bug(
                "endpoints", AdapterBug(f"endpoints({uid!r}) must return its DeploymentEndpoints")
            )
        return endpoints


_MIXINS = (
    ("Logs", _LogsMixin),
    ("Watch", _WatchMixin),
    ("Metrics", _MetricsMixin),
    ("Endpoints", _EndpointsMixin),
)
#: (logs, watch, metrics, endpoints) -> the guard class with exactly those optional methods (made once,
#: on first use, e.g. ``GuardedLogsWatchProvider``)
_CLASSES: dict[tuple[bool, ...], type[GuardedProvider]] = {(False, False, False, False): GuardedProvider}


def _guard_class(capable: tuple[bool, ...]) -> type[GuardedProvider]:
    cls = _CLASSES.get(capable)
    if cls is None:
        chosen = [(name, mixin) for (name, mixin), on in zip(_MIXINS, capable, strict=True) if on]
        name = "Guarded" + "".join(n for n, _ in chosen) + "Provider"
        doc = f"Guard for a provider with {', '.join(n.lower() for n, _ in chosen)}."
        cls = _CLASSES[capable] = type(name, tuple(m for _, m in chosen), {"__doc__": doc})
    return cls


def guard(provider: Provider) -> GuardedProvider:
    """Wrap ``provider`` (idempotent); the wrapper has ``logs``/``watch``/``usage`` only if the
    adapter has them, so capability checks (``isinstance``) see through it."""
    if isinstance(provider, GuardedProvider):
        return provider
    capable = tuple(
        isinstance(provider, p) for p in (SupportsLogs, SupportsWatch, SupportsMetrics, SupportsEndpoints)
    )
    return _guard_class(capable)(provider)
