"""Bounds on ``kubectl logs`` streams: how many follow at once, and for how long.

``pods/log`` is a right tenants routinely hold, and each follow stream holds a connection to the
pod's provider for as long as the client stays. Without bounds, one tenant could keep enough open
to exhaust the adapter's log-stream pool (or the provider's own limits) for every other pod, and
keep them open for ever. So the kubelet API admits at most ``max_follow_per_pod`` follow streams
per pod and ``max_follow_per_provider`` per provider (a 429 with ``Retry-After`` beyond, as the
apiserver answers when it sheds load), and ends any stream after ``max_stream_seconds`` or after
``idle_timeout_seconds`` without a byte from the provider, with a last line saying why.
Snapshots (no ``follow``) end on their own and are not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

__all__ = ["LogStreamCaps", "LogStreamLimiter", "StreamSlot", "TooManyStreams", "bounded"]


@dataclass(frozen=True)
class LogStreamCaps:
    """The bounds (``kubelet.logs`` in the config; these defaults are its defaults)."""

    max_follow_per_pod: int = 10
    max_follow_per_provider: int = 50
    max_stream_seconds: float = 3600.0
    idle_timeout_seconds: float = 900.0
    retry_after_seconds: int = 10


class TooManyStreams(Exception):
    """A follow stream over a cap; ``str()`` says which cap, for the 429's body."""


class StreamSlot:
    """One admitted follow stream; ``release`` is idempotent (called from wherever it ends)."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class LogStreamLimiter:
    """Counts open follow streams per pod and per provider (one event loop: no locking needed)."""

    def __init__(self, caps: LogStreamCaps) -> None:
        self.caps = caps
        self._by_pod: Counter[str] = Counter()
        self._by_provider: Counter[str] = Counter()

    def open_streams(self, provider: str) -> int:
        return self._by_provider[provider]

    def admit(self, provider: str, pod: str) -> StreamSlot:
        """A slot for one more follow stream of ``pod`` at ``provider``, or ``TooManyStreams``."""
        caps = self.caps
        if self._by_pod[pod] >= caps.max_follow_per_pod:
            raise TooManyStreams(
                f"too many log streams: pod {pod} already has {self._by_pod[pod]} follow streams open "
                f"(kubelet.logs.max_follow_per_pod = {caps.max_follow_per_pod}); retry later"
            )
        if self._by_provider[provider] >= caps.max_follow_per_provider:
            raise TooManyStreams(
                f"too many log streams: provider {provider!r} already serves "
                f"{self._by_provider[provider]} follow streams "
                f"(kubelet.logs.max_follow_per_provider = {caps.max_follow_per_provider}); retry later"
            )
        self._by_pod[pod] += 1
        self._by_provider[provider] += 1

        def release() -> None:
            for counter, key in ((self._by_pod, pod), (self._by_provider, provider)):
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]

        return StreamSlot(release)


async def bounded(
    chunks: AsyncIterator[bytes], caps: LogStreamCaps, on_close: Callable[[], None] = lambda: None
) -> AsyncIterator[bytes]:
    """``chunks`` until they end, ``caps.max_stream_seconds`` pass, or the provider sends nothing
    for ``caps.idle_timeout_seconds``; the source is closed and ``on_close`` called either way."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + caps.max_stream_seconds
    try:
        async with contextlib.aclosing(chunks):  # type: ignore[type-var]
            while True:
                left = deadline - loop.time()
                by_lifetime = left <= caps.idle_timeout_seconds  # which bound ends this wait
                try:
                    if left <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(min(left, caps.idle_timeout_seconds)):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if by_lifetime:
                        reason = f"open for {caps.max_stream_seconds:g} s (kubelet.logs.max_stream_seconds)"
                    else:
                        reason = f"no output for {caps.idle_timeout_seconds:g} s (kubelet.logs.idle_timeout_seconds)"
                    yield f"\n[vkprovider: log stream closed: {reason}; run kubectl logs again to go on]\n".encode()
                    return
                yield chunk
    finally:
        on_close()
