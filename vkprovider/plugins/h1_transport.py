"""An httpx transport for an adapter's plain calls over ``vkprovider.h1`` pools.

:class:`~vkprovider.plugins.direct_http.DirectSender` hands one ``httpx.Request`` to a
transport; over httpx-aiohttp's ``AiohttpTransport`` most of a call's CPU is still aiohttp's
per-request machinery. :class:`H1Transport` sends the same request through a lean keep-alive
pool per origin (llhttp parsing, no cookie jar, no writer task): the same calls at about half
the CPU (bench/README.md, *the lean client*). It buffers whole answers, so it serves plain
calls only: streams (logs, watches) stay on a streaming transport. Tests keep injecting
``httpx.MockTransport``/respx instead, exactly as before.

Failures are httpx's: a refused or failed connect is ``httpx.ConnectError``, a timeout
``httpx.ReadTimeout`` (the whole exchange, connecting included, within the request's largest
timeout), an answer cut short or malformed ``httpx.RemoteProtocolError``, each with its
``request`` set. Idempotent requests on a reused connection the server closed before answering
are retried once (``vkprovider.h1``'s rule); a POST never is.
"""

from __future__ import annotations

import ssl

import httpx

from vkprovider import h1

__all__ = ["H1Transport"]

#: headers the pool writes itself (from the target and the body)
_OWN = frozenset({b"host", b"content-length", b"transfer-encoding"})
_NO_TIMEOUT = 300.0


class H1Transport(httpx.AsyncBaseTransport):
    """``limit``: exchanges at once per origin. ``verify``: the TLS context for https origins
    (default: httpx's, so the same CAs as an ``AsyncClient``: certifi's, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``; hostnames checked)."""

    def __init__(self, *, limit: int = 100, verify: ssl.SSLContext | None = None) -> None:
        self._limit = limit
        self._verify = verify
        self._pools: dict[tuple[str, str, int], h1.Pool] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        pool = self._pools.get((url.scheme, url.host, url.port or 0)) or self._pool(url)
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower() not in _OWN
        ]
        body = request.content if request.method not in ("GET", "HEAD") or request.content else None
        timeouts = [t for t in (request.extensions.get("timeout") or {}).values() if t is not None]
        try:
            answer = await pool.request(
                request.method,
                url.raw_path.decode("ascii"),
                headers,
                body,
                timeout=max(timeouts) if timeouts else _NO_TIMEOUT,
            )
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer in time: {exc}", request=request) from exc
        except h1.H1Error as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc
        return httpx.Response(answer.status, headers=answer.headers, content=answer.body, request=request)

    def _pool(self, url: httpx.URL) -> h1.Pool:
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} URLs are not supported")
        secure = url.scheme == "https"
        context = (self._verify or httpx.create_ssl_context()) if secure else None
        if context is not None:
            context.set_alpn_protocols(["http/1.1"])
        pool = h1.Pool(url.host, url.port or (443 if secure else 80), ssl_context=context, limit=self._limit)
        self._pools[url.scheme, url.host, url.port or 0] = pool
        return pool

    async def aclose(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.close()
