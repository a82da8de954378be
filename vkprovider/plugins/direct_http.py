"""Plain calls straight to an httpx transport, without ``httpx.AsyncClient``'s per-request work.

For an adapter's calls (deploy, get, delete: a method, a path, maybe a query and a JSON body),
``AsyncClient`` costs as much CPU as the transport under it: URL merging and parsing, cookie
extraction, the auth and redirect generators, header merging, the bound response stream. Profiled
on the HTTP provider path (bench/bench_pods.py --provider fakecloud --profile), that was a third
of all the service's CPU spent on provider calls. :class:`DirectSender` builds one
``httpx.Request`` and hands it to the transport, so tests still inject ``httpx.MockTransport``,
``ASGITransport`` or respx's mocks exactly as before.

What it keeps of the client it replaces, because adapters depend on it:

* the API key's semantics (:class:`~vkprovider.plugins.apikey.BearerAuth`'s, the same source):
  the header is the key current at send time, and on 401/403 the source is read again and, if the
  key changed, the request is sent once more with the new key;
* the timeout (the ``timeout`` extension every httpx transport reads);
* transport errors as httpx raises them (``httpx.TransportError`` subclasses, with their
  ``request`` set), and a response whose body is read and ``request`` set (``json()``, ``text``,
  ``response.request.url`` work as after ``AsyncClient.request``).

What it drops: cookies (no cloud API here sets any), redirects (an API answers, it does not
redirect; a 3xx is returned as is and maps to an error), event hooks, ``Accept-Encoding``
(bodies come uncompressed), and environment proxies (an injected transport never had them:
``AsyncClient`` ignores ``HTTP(S)_PROXY`` when given a transport too).
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from typing import Any

import httpx

from vkprovider.plugins.apikey import ApiKeySource

__all__ = ["DirectSender"]

#: Statuses after which a rotated key is tried once (``BearerAuth``'s rule).
_REFUSED = (401, 403)


def encode_json(body: Any) -> bytes:
    """``body`` as httpx 0.28 encodes ``json=``: compact, UTF-8, no NaN."""
    return jsonlib.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class DirectSender:
    """Sends ``method base_url+path[?query] [JSON body]`` through ``transport``; see the module doc.

    ``key``: the API key source (None: no ``Authorization`` header). ``headers``: sent with every
    request (e.g. ``Accept``). The transport is not closed here: its owner (the adapter's
    ``AsyncClient`` over the same pool, say) closes it.
    """

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        *,
        base_url: str,
        timeout: float | httpx.Timeout,
        key: ApiKeySource | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._transport = transport
        self._base = base_url.rstrip("/")
        self._timeout = httpx.Timeout(timeout).as_dict()
        self._key = key
        self._headers = [(name.encode(), value.encode()) for name, value in (headers or {}).items()]

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | str | None = None,
        json: Any = None,
    ) -> httpx.Response:
        """One call: ``path`` is appended to the base URL; ``params`` is a mapping (encoded as
        httpx encodes ``params=``) or an already encoded query string. Returns the response,
        whatever its status, with its body read."""
        url = self._base + path
        if params:
            url += "?" + (params if isinstance(params, str) else str(httpx.QueryParams(params)))
        headers = self._headers
        content: bytes | None = None
        if json is not None:
            content = encode_json(json)
            headers = [*headers, (b"Content-Type", b"application/json")]
        if self._key is None:
            return await self._send(method, url, headers, content)
        response = await self._send(method, url, [*headers, self._authorization()], content)
        if response.status_code in _REFUSED and self._key.refresh():
            response = await self._send(method, url, [*headers, self._authorization()], content)
        return response

    def _authorization(self) -> tuple[bytes, bytes]:
        assert self._key is not None
        return (b"Authorization", f"Bearer {self._key.get()}".encode())

    async def _send(
        self, method: str, url: str, headers: list[tuple[bytes, bytes]], content: bytes | None
    ) -> httpx.Response:
        request = httpx.Request(
            method, url, headers=headers, content=content, extensions={"timeout": self._timeout}
        )
        try:
            response = await self._transport.handle_async_request(request)
            response.request = request
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx.RequestError as exc:
            exc.request = request  # as AsyncClient leaves it: error mappers may read it
            raise
        return response
