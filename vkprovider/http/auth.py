"""Authentication and authorization like the kubelet's, for the kubelet API and the admin API.

Authentication: a client certificate already verified by the TLS layer against the configured
client CA (user = CN, groups = O, as the apiserver reads certificates), or a bearer token
checked by a ``TokenReview``. Authorization: a ``SubjectAccessReview`` on ``nodes/<node>`` with
the kubelet's subresource mapping (``pkg/kubelet/server/auth.go``): ``/stats`` → stats,
``/metrics`` → metrics, ``/logs`` → log, ``/checkpoint`` → checkpoint, and everything else
(``/containerLogs`` and ``/exec`` included) → proxy; ``/pods``, ``/runningpods`` and
``/healthz`` are also allowed by the fine-grained ``pods``/``healthz`` subresources, tried first.
A request passes if any of its attributes is allowed.

Both reviews are cached briefly (the kubelet's defaults: tokens 2 min, allowed 5 min, denied
30 s), keyed by a hash of the token, never the token itself; nothing here logs a token.
No credentials → 401 (unless anonymous access is explicitly enabled); not allowed → 403.
Reviews in flight are bounded and coalesced per token hash (:mod:`vkprovider.http.reviews`):
past the bound a request gets 429 with ``Retry-After`` at once, so a flood of random tokens
costs a bounded queue, not the process's memory or the apiserver's attention; a peer that
keeps being refused (401/429) gets its answers paced (:mod:`vkprovider.http.pacing`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from vkprovider.http.pacing import RefusalPacer
from vkprovider.http.reviews import Busy, ReviewBudget
from vkprovider.kube.errors import KubeError

log = logging.getLogger(__name__)

ANONYMOUS = "system:anonymous"
_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
#: (path prefix, subresource) in the kubelet's order; the first match wins.
_COARSE = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/checkpoint", "checkpoint"))
_FINE = (("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"), ("/runningpods", "pods"))


class Reviewer(Protocol):
    """What the reviews need from the API client (``vkprovider.kube.client.KubeClient``)."""

    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Denied(Exception):
    """A request that is not let through: ``status`` 401, 403 or 429 (too many reviews in flight,
    with ``retry_after`` seconds), with a message for the caller."""

    def __init__(self, status: int, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def is_loopback_bind(host: str) -> bool:
    """True if a server bound to ``host`` is reachable only from this machine (127.0.0.0/8, ::1,
    ``localhost``). ``0.0.0.0``/``::`` and every other address are not: they need authentication."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def is_loopback_peer(client: Any) -> bool:
    """True if an ASGI ``scope["client"]`` is this machine (an IPv4-mapped 127.x included)."""
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def is_subpath(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def kubelet_subresources(path: str) -> list[str]:
    """The subresources of ``nodes/<name>`` that may allow ``path``, as the kubelet maps them."""
    out = [sub for prefix, sub in _FINE if is_subpath(path, prefix)][:1]
    coarse = next((sub for prefix, sub in _COARSE if is_subpath(path, prefix)), "proxy")
    return [*out, coarse]


def user_from_certificate(peercert: Mapping[str, Any] | None) -> User | None:
    """The user of a TLS peer certificate (as ``ssl.SSLSocket.getpeercert()`` returns it)."""
    if not peercert:
        return None
    cn, orgs = "", []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not cn:
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    return User(cn, tuple(orgs)) if cn else None


class _TtlCache:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._items: dict[str, tuple[float, Any]] = {}

    def get(self, key: str) -> Any:
        hit = self._items.get(key)
        if hit is None or hit[0] <= self._clock():
            self._items.pop(key, None)
            return None
        return hit[1]

    def put(self, key: str, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        if len(self._items) > 4096:  # bounded: drop expired, then the oldest
            now = self._clock()
            self._items = {k: v for k, v in self._items.items() if v[0] > now}
            while len(self._items) > 4096:
                self._items.pop(next(iter(self._items)))
        self._items[key] = (self._clock() + ttl, value)


class Authenticator:
    """TokenReview/SubjectAccessReview with short caches; one per protected API."""

    def __init__(
        self,
        reviewer: Reviewer | None,
        node_name: str,
        *,
        anonymous: bool = False,
        token_ttl: float = 120.0,
        allowed_ttl: float = 300.0,
        denied_ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        budget: ReviewBudget | None = None,
        pacer: RefusalPacer | None = None,
    ) -> None:
        self._reviewer = reviewer
        #: reviews in flight, bounded and coalesced (share one between the APIs of a process)
        self.budget = budget or ReviewBudget()
        #: slows the answers to a peer that keeps being refused (401/429)
        self.pacer = pacer or RefusalPacer()
        self.node_name = node_name
        self.anonymous = anonymous
        self._token_ttl, self._allowed_ttl, self._denied_ttl = token_ttl, allowed_ttl, denied_ttl
        self._tokens = _TtlCache(clock)
        self._decisions = _TtlCache(clock)
        self.reviews = 0  #: TokenReviews + SubjectAccessReviews sent (cache effectiveness, tests)

    async def authenticate(self, headers: Mapping[str, str], peercert: Mapping[str, Any] | None) -> User:
        user = user_from_certificate(peercert)
        if user is not None:
            return user
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token:
            return await self._review_token(token)
        if self.anonymous:
            return User(ANONYMOUS, ("system:unauthenticated",))
        raise Denied(401, "Unauthorized: a client certificate or a bearer token is required")

    async def _review_token(self, token: str) -> User:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None:
            if isinstance(cached, User):
                return cached
            raise Denied(401, "Unauthorized: the bearer token was rejected")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = (await self._review("/apis/authentication.k8s.io/v1/tokenreviews", body, key)).get(
            "status", {}
        )
        if not status.get("authenticated"):
            self._tokens.put(key, False, self._denied_ttl)
            raise Denied(401, "Unauthorized: the bearer token was rejected")
        info = status.get("user", {})
        user = User(
            str(info.get("username", "")),
            tuple(info.get("groups") or ()),
            str(info.get("uid", "")),
            {k: tuple(v) for k, v in (info.get("extra") or {}).items()},
        )
        self._tokens.put(key, user, self._token_ttl)
        return user

    async def authorize(
        self, user: User, verb: str, subresources: list[str], path: str, *, node: str | None = None
    ) -> None:
        """Raise ``Denied(403)`` unless one of ``subresources`` of ``node`` (default: this
        authenticator's node) allows ``verb``."""
        node = node or self.node_name
        reasons = []
        for sub in subresources:
            allowed, reason = await self._access(user, verb, sub, node)
            if allowed:
                return
            reasons.append(reason)
        first = subresources[0] if subresources else "proxy"
        raise Denied(
            403,
            f"Forbidden (user={user.name}, verb={verb}, resource=nodes, subresource={first}"
            f"{', or ' + ', '.join(subresources[1:]) if len(subresources) > 1 else ''}, "
            f"name={node}, path={path})" + (f": {reasons[-1]}" if reasons[-1] else ""),
        )

    async def _access(self, user: User, verb: str, subresource: str, node: str) -> tuple[bool, str]:
        key = json.dumps(
            [user.name, user.groups, user.uid, sorted(user.extra.items()), verb, subresource, node]
        )
        cached = self._decisions.get(key)
        if cached is not None:
            return tuple(cached)
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "resourceAttributes": {
                "verb": verb,
                "resource": "nodes",
                "subresource": subresource,
                "name": node,
                "version": "v1",
            },
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        status = (
            await self._review(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                body,
                hashlib.sha256(key.encode()).hexdigest(),
            )
        ).get("status", {})
        decision = (bool(status.get("allowed")), str(status.get("reason", "")))
        self._decisions.put(key, decision, self._allowed_ttl if decision[0] else self._denied_ttl)
        return decision

    async def _review(self, path: str, body: dict[str, Any], key: str) -> dict[str, Any]:
        """One review under the budget; ``key`` (a hash, never the token) coalesces equal ones.

        A failed review answers the caller with a generic message: who may be unauthenticated
        learns neither the apiserver's address nor the transport error (they go to the log)."""
        reviewer = self._reviewer
        if reviewer is None:
            raise Denied(401, "Unauthorized: no API client to review credentials with")
        kind = path.rsplit("/", 1)[-1]

        async def call() -> Any:
            self.reviews += 1
            return await reviewer.request("POST", path, body=body)

        try:
            result = await self.budget.review(f"{kind}:{key}", call)
        except Busy as exc:
            raise Denied(
                429,
                "Too many requests: credential reviews are busy; retry later",
                retry_after=exc.retry_after,
            ) from None
        except KubeError as exc:  # the API down or our RBAC short: a clear answer, nothing cached
            log.warning("%s failed: %s", kind, exc)
            raise Denied(
                401 if kind == "tokenreviews" else 403,
                "could not review the request's credentials right now; try again later",
            ) from None
        return result if isinstance(result, dict) else {}


Attributes = Callable[[str, str], tuple[str, list[str]]]
"""(method, path) → (verb, subresources); None-free so every path gets a decision."""


def kubelet_attributes(method: str, path: str) -> tuple[str, list[str]]:
    return _VERBS.get(method.upper(), method.lower()), kubelet_subresources(path)


def admin_attributes(method: str, path: str) -> tuple[str, list[str]]:
    """The admin API's operator views and dry-runs count as ``nodes/<node>/proxy`` (what reading
    the node's kubelet API needs too), with the verb of the method: GET → get, POST → create."""
    return _VERBS.get(method.upper(), method.lower()), ["proxy"]


#: Admin paths that need a caller once the admin API binds beyond loopback.
ADMIN_PROTECTED = ("/state", "/placement", "/explain")


def admin_protects(path: str) -> bool:
    return any(is_subpath(path, prefix) for prefix in ADMIN_PROTECTED)


class AuthMiddleware:
    """ASGI middleware: authenticate and authorize every request whose path ``protects`` says,
    on each node ``nodes`` names for the request (default: the authenticator's node).

    The peer certificate comes from the connection (``scope["state"]["peercert"]``, put there by
    :mod:`vkprovider.http.server`); the verdict lands in ``scope["state"]["user"]``.
    """

    def __init__(
        self,
        app: ASGIApp,
        auth: Authenticator,
        *,
        attributes: Attributes = kubelet_attributes,
        protects: Callable[[str], bool] = lambda path: True,
        nodes: Callable[[Scope], list[str]] | None = None,
    ) -> None:
        self.app, self.auth, self.attributes, self.protects = app, auth, attributes, protects
        self.nodes = nodes or (lambda scope: [auth.node_name])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # start-up and shutdown: no caller to check
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a WebSocket (or anything else) never reaches the app
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "not supported"})
            return
        if not self.protects(scope["path"]):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        headers = {k.decode("latin1").lower(): v.decode("latin1") for k, v in scope.get("headers", [])}
        try:
            if "authorization" in headers and scope.get("scheme") != "https":
                _no_cleartext_token(scope.get("client"))
            user = await self.auth.authenticate(headers, state.get("peercert"))
            verb, subresources = self.attributes(scope["method"], scope["path"])
            for node in self.nodes(scope):
                await self.auth.authorize(user, verb, subresources, scope["path"], node=node)
        except Denied as exc:
            client = scope.get("client")
            if exc.status in (401, 429) and client:
                await self.auth.pacer.refused(str(client[0]))
            await _plain(send, exc.status, str(exc), retry_after=exc.retry_after)
            return
        state["user"] = user
        await self.app(scope, receive, send)


def _no_cleartext_token(client: Any) -> None:
    """A bearer token is a full apiserver credential: over plain HTTP it is accepted only from
    this machine (a port-forward, a local CLI), never from the network."""
    if not is_loopback_peer(client):
        raise Denied(
            403,
            "Forbidden: bearer tokens are not accepted over plain HTTP from another host (the token "
            "would travel in clear text); the server needs TLS (http.tls_cert_file and "
            "http.tls_key_file), or call it from this host",
        )


async def _plain(
    send: Callable[[Any], Awaitable[None]], status: int, text: str, *, retry_after: float | None = None
) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="kubelet"'))
    if retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(retry_after))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
