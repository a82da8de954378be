"""``limit_bytes``: a log stream cut at ``limitBytes`` and its source closed at once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from vkprovider.plugins.api import limit_bytes


class Source:
    """Endless chunks; counts what was pulled and whether it was closed."""

    def __init__(self, chunk: bytes = b"0123456789", end_after: int | None = None) -> None:
        self.chunk, self.end_after = chunk, end_after
        self.pulled = 0
        self.closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            while self.end_after is None or self.pulled < self.end_after:
                self.pulled += 1
                yield self.chunk
        finally:
            self.closed = True


@pytest.mark.parametrize(
    ("limit", "expected", "pulled"),
    [(1, b"0", 1), (10, b"0123456789", 1), (25, b"0123456789" * 2 + b"01234", 3)],
)
async def test_the_stream_stops_at_the_limit_and_the_source_is_closed(
    limit: int, expected: bytes, pulled: int
) -> None:
    source = Source()
    got = b"".join([c async for c in limit_bytes(source.chunks(), limit)])
    assert got == expected
    assert source.pulled == pulled  # not one chunk more than needed
    assert source.closed


async def test_without_a_limit_everything_passes_and_a_short_stream_ends_on_its_own() -> None:
    source = Source(end_after=3)
    assert b"".join([c async for c in limit_bytes(source.chunks(), None)]) == b"0123456789" * 3
    short = Source(end_after=2)
    assert b"".join([c async for c in limit_bytes(short.chunks(), 100)]) == b"0123456789" * 2
    assert short.closed


async def test_closing_the_limited_stream_closes_the_source() -> None:
    source = Source()
    limited = limit_bytes(source.chunks(), 10_000)
    assert await anext(limited) == b"0123456789"
    await limited.aclose()  # type: ignore[attr-defined]
    assert source.closed
