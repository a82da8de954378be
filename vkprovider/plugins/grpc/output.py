"""A plugin's stdout and stderr as bounded log lines, whatever bytes it writes.

A plugin is someone else's program: it may print a 1 MiB JSON line, a progress bar without a
newline, or binary garbage. ``StreamReader.readline`` raises on a line over its 64 KiB limit;
a reader task that dies of it leaves its pipe full and the plugin blocked on ``write``, and
asyncio's ``Process.wait()`` waits until every pipe it created is closed, so a killed plugin
would never be seen to exit and never be restarted. Hence:

* the pipes are our own (``os.pipe``), handed to the child as plain file descriptors: the
  ``Process`` object knows nothing of them and ``wait()`` depends only on the process exiting;
* the event loop feeds their bytes straight to a protocol (:class:`OutputPipe`): no buffer that
  can fill, no reader task that can die; a failure in handling closes the pipe (the plugin then
  gets EPIPE, not a blocked write);
* :class:`LineSplitter` turns bytes into lines of at most ``max_bytes``: the head of a longer
  line is logged at once, the rest is counted and dropped; bytes that are not UTF-8 and control
  characters are escaped, so a log line is always printable text;
* :class:`Throttle` caps the lines per second that reach the log (binary output has a newline
  every 256 bytes on average): the rest are counted, and the count is logged with the next line
  that passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable

from vkprovider.ratelimit import TokenBucket

log = logging.getLogger(__name__)

#: Longest log line taken from a plugin, in bytes; the rest of a longer line is dropped.
MAX_LINE_BYTES = 4096
#: Lines per second (and at once) one output stream of a plugin may put in the log.
LINES_PER_SECOND = 100.0
LINES_BURST = 1000

# C0 and C1 control characters except tab, Unicode line separators and bidi overrides: a
# terminal escape, a forged line break or reversed text in a log line is an attack.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(raw: bytes | bytearray) -> str:
    """``raw`` as one line of printable text: invalid UTF-8 and control characters escaped."""
    text = bytes(raw).decode("utf-8", "backslashreplace").rstrip("\r")
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)


class LineSplitter:
    """Bytes in, complete lines of at most ``max_bytes`` out; memory stays under ``max_bytes``."""

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes
        self._line = bytearray()
        self._dropped = 0  # bytes of the current line beyond max_bytes

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        view = memoryview(data)
        start = 0
        while True:
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            self._take(view[start:end], out)
            if newline < 0:
                return out
            self._end_line(out)
            start = newline + 1

    def flush(self) -> list[str]:
        """The unterminated last line, if any (call at end of stream)."""
        out: list[str] = []
        if self._line or self._dropped:
            self._end_line(out)
        return out

    def _take(self, piece: memoryview, out: list[str]) -> None:
        if self._dropped:
            self._dropped += len(piece)
            return
        room = self.max_bytes - len(self._line)
        if len(piece) <= room:
            self._line += piece
            return
        self._line += piece[:room]
        out.append(f"{printable(self._line)} [line truncated]")
        self._line.clear()
        self._dropped = len(piece) - room

    def _end_line(self, out: list[str]) -> None:
        if self._dropped:
            out.append(f"[{self._dropped} more bytes of that line dropped]")
        else:
            out.append(printable(self._line))
        self._line.clear()
        self._dropped = 0


class Throttle:
    """Pass at most ``rate`` lines a second (``burst`` at once) to ``emit``; count the rest."""

    def __init__(
        self,
        emit: Callable[[str], None],
        rate: float = LINES_PER_SECOND,
        burst: int = LINES_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emit = emit
        self._bucket = TokenBucket(rate, burst, clock=clock)
        self.dropped = 0

    def __call__(self, line: str) -> None:
        if not self._bucket.try_acquire():
            self.dropped += 1
            return
        if self.dropped:
            self._emit(f"[{self.dropped} lines dropped: output over {self._bucket.rate:g} lines/s]")
            self.dropped = 0
        self._emit(line)


class OutputPipe(asyncio.Protocol):
    """The read end of one output pipe: every line goes to ``on_line``; it never stops reading."""

    def __init__(self, on_line: Callable[[str], None], max_bytes: int = MAX_LINE_BYTES) -> None:
        self._on_line = on_line
        self._splitter = LineSplitter(max_bytes)
        self._transport: asyncio.BaseTransport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._emit(self._splitter.feed, data)

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself; connection_lost flushes

    def connection_lost(self, exc: Exception | None) -> None:
        self._emit(lambda _: self._splitter.flush(), b"")
        if not self.closed.done():
            self.closed.set_result(None)

    def _emit(self, lines_of: Callable[[bytes], list[str]], data: bytes) -> None:
        try:
            for line in lines_of(data):
                self._on_line(line)
        except Exception:  # never let output handling stop the reading: log and carry on
            log.exception("plugin output handler failed; line dropped")

    async def aclose(self, drain_seconds: float) -> None:
        """Wait up to ``drain_seconds`` for the writer's end of stream (its last words), then close."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_seconds):
                await asyncio.shield(self.closed)
        if self._transport is not None:
            self._transport.close()


async def open_output(
    on_line: Callable[[str], None], max_bytes: int = MAX_LINE_BYTES
) -> tuple[int, OutputPipe]:
    """A new pipe: (write end for the child, the protocol reading the other end).

    The caller passes the write end as the child's stdout/stderr and closes it once the child
    is started (or failed to start)."""
    read_fd, write_fd = os.pipe()
    try:
        reader = os.fdopen(read_fd, "rb", buffering=0)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    try:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.connect_read_pipe(lambda: OutputPipe(on_line, max_bytes), reader)
    except BaseException:
        reader.close()
        os.close(write_fd)
        raise
    return write_fd, protocol
