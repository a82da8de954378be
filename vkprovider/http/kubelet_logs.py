"""``/containerLogs/{namespace}/{pod}/{container}``: the kubelet's log endpoint, streamed from the
provider's ``logs()``.

Query parameters as the kubelet reads them (``kubectl logs`` sends them through the apiserver):
``follow``, ``tailLines``, ``limitBytes``, ``sinceSeconds``, ``sinceTime`` (RFC 3339),
``timestamps``, ``previous``. Bad values are a 400 naming the parameter. With ``follow`` the
response streams until the provider ends it (the deployment ended) or the client goes away;
a client that disconnects closes the provider's stream (``aclosing``), so nothing leaks.
Follow streams are capped per pod and per provider, and every stream's lifetime and idle time
are bounded (:mod:`.log_caps`); every stream is cut at ``limitBytes`` here too, so a provider
that ignores the option still cannot send more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from vkprovider.errors import NotFound, ProviderError
from vkprovider.http.log_caps import LogStreamCaps, LogStreamLimiter, TooManyStreams, bounded
from vkprovider.models import LogOptions
from vkprovider.plugins.api import Provider, SupportsLogs, limit_bytes

log = logging.getLogger(__name__)

FIRST_CHUNK_WAIT_SECONDS = 2.0
_TRUE, _FALSE = {"true", "1", "t", "yes"}, {"false", "0", "f", "no", ""}


def _flag(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise HTTPException(400, f"{name}: {value!r} is not a boolean")


def _count(query: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise HTTPException(400, f"{name}: must be >= {minimum}, got {value}")
    return value


def parse_since_time(raw: str, now: datetime) -> int:
    """Seconds since an RFC 3339 ``sinceTime`` (rounded up, at least 0); 400 if malformed."""
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise HTTPException(400, f"sinceTime: {raw!r} is not an RFC 3339 time") from None
    if at.tzinfo is None:
        raise HTTPException(400, f"sinceTime: {raw!r} has no time zone (RFC 3339 needs one)")
    return max(0, math.ceil((now - at).total_seconds()))


def log_options(container: str, query: Mapping[str, str], now: datetime | None = None) -> LogOptions:
    """The provider's ``LogOptions`` from the kubelet's query parameters (400 on bad input)."""
    since = _count(query, "sinceSeconds", 1)
    since_time = query.get("sinceTime")
    if since_time:
        if since is not None:
            raise HTTPException(400, "sinceSeconds, sinceTime: at most one may be set")
        since = parse_since_time(since_time, now or datetime.now(UTC))
    return LogOptions(
        container=container,
        follow=_flag(query, "follow"),
        tail_lines=_count(query, "tailLines", 0),
        limit_bytes=_count(query, "limitBytes", 1),
        since_seconds=since,
        timestamps=_flag(query, "timestamps"),
    )


def check_container(pod: Mapping[str, Any], container: str) -> None:
    names = [c.get("name") for c in pod.get("spec", {}).get("containers", [])]
    if container not in names:
        meta = pod.get("metadata", {})
        raise HTTPException(
            404,
            f"container {container!r} is not valid for pod {meta.get('namespace')}/{meta.get('name')}"
            f" (containers: {', '.join(str(n) for n in names)})",
        )


def stream_logs(
    provider: Provider,
    provider_name: str,
    uid: str,
    options: LogOptions,
    limiter: LogStreamLimiter | None = None,
) -> StreamingResponse:
    """The response for one log request; a provider without ``logs`` is a 501 naming it, a
    follow stream over a cap of ``limiter`` a 429 with ``Retry-After``."""
    if not isinstance(provider, SupportsLogs):
        raise HTTPException(
            501, f"provider {provider_name!r} does not support logs (capability 'logs' not offered)"
        )
    caps = limiter.caps if limiter is not None else LogStreamCaps()
    release: Callable[[], None] = lambda: None  # noqa: E731
    if options.follow and limiter is not None:
        try:
            release = limiter.admit(provider_name, uid).release
        except TooManyStreams as exc:
            log.warning("logs of %s from %s refused: %s", uid, provider_name, exc)
            raise HTTPException(
                429, str(exc), headers={"Retry-After": str(caps.retry_after_seconds)}
            ) from None
    try:
        source = provider.logs(uid, options)
        body = limit_bytes(bounded(_relay(source, provider_name, uid), caps, release), options.limit_bytes)
    except BaseException:
        release()  # the generator that would release it never started
        raise
    return StreamingResponse(body, media_type="text/plain")


async def first_chunk(
    response: StreamingResponse, wait: float = FIRST_CHUNK_WAIT_SECONDS
) -> StreamingResponse:
    """Wait (briefly) for the first chunk before answering, so an error the provider raises at
    once is a status code, not a cut body. A quiet ``follow`` (nothing logged yet) answers 200
    after ``wait`` seconds and streams on."""
    body = response.body_iterator
    assert isinstance(body, AsyncIterator)
    first = asyncio.ensure_future(anext(body))
    done, _ = await asyncio.wait({first}, timeout=wait)
    if done:
        try:
            first.result()
        except StopAsyncIteration:
            pass
        except NotFound as exc:
            raise HTTPException(404, f"logs: {exc}") from None
        except ProviderError as exc:
            raise HTTPException(502, f"logs: {exc}") from None

    async def rest() -> AsyncIterator[bytes]:
        try:
            try:
                head = await first
            except StopAsyncIteration:
                return
            except ProviderError as exc:  # raised after the quiet wait: the status is sent
                yield f"[vkprovider: logs: {exc}]\n".encode()
                return
            yield head
            async for chunk in body:
                yield chunk
        finally:
            if not first.done():  # the client left before the first line
                first.cancel()
                with contextlib.suppress(BaseException):
                    await first
            await body.aclose()  # type: ignore[attr-defined]

    response.body_iterator = rest()
    return response


async def _relay(source: AsyncIterator[bytes], provider_name: str, uid: str) -> AsyncIterator[bytes]:
    sent = False
    async with contextlib.aclosing(source):  # type: ignore[type-var]
        try:
            async for chunk in source:
                sent = True
                yield chunk
        except ProviderError as exc:
            if not sent:  # before the first byte: a status code (see first_chunk)
                raise
            # mid-stream: the status is already sent; end the body with the reason
            log.warning("logs of %s from %s ended: %s", uid, provider_name, exc)
            yield f"\n[vkprovider: log stream from provider {provider_name!r} ended: {exc}]\n".encode()
        finally:
            log.debug("log stream of %s from %s closed", uid, provider_name)
