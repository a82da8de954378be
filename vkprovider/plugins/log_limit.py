"""``limit_bytes``: cut a log stream at ``LogOptions.limit_bytes`` and stop reading it.

A log can be gigabytes; reading it whole before cutting (or reading on after the limit) costs
memory and a provider connection for bytes nobody asked for. This wrapper passes chunks through
until the limit, trims the last one, and closes the source at once, so the adapter's HTTP stream
is released as soon as the caller has its bytes. The kubelet API applies it to every provider's
stream as well, so an adapter that ignores ``limit_bytes`` still cannot send more.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

__all__ = ["limit_bytes"]


async def limit_bytes(chunks: AsyncIterator[bytes], limit: int | None) -> AsyncIterator[bytes]:
    """``chunks`` up to ``limit`` bytes in total (all of them if ``limit`` is ``None``); the source
    is closed when the limit is reached, when this generator is closed, or when it ends."""
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        if limit is None:
            async for chunk in chunks:
                yield chunk
            return
        left = limit
        if left <= 0:
            return
        async for chunk in chunks:
            if not chunk:
                continue
            if len(chunk) >= left:
                yield chunk[:left]
                return
            left -= len(chunk)
            yield chunk
