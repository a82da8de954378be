"""A plugin's output as bounded, printable log lines, whatever bytes arrive and however chunked."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vkprovider.plugins.grpc.output import LineSplitter, Throttle, printable

CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_lines_split_on_newlines_across_chunks() -> None:
    splitter = LineSplitter(16)
    assert splitter.feed(b"one\ntw") == ["one"]
    assert splitter.feed(b"o\r\nthree") == ["two"]
    assert splitter.flush() == ["three"]
    assert splitter.flush() == []


def test_a_long_line_is_logged_as_its_head_then_the_size_dropped() -> None:
    splitter = LineSplitter(8)
    assert splitter.feed(b"abcdefghij") == ["abcdefgh [line truncated]"]
    assert splitter.feed(b"k" * 1000) == []  # memory stays bounded: the rest is only counted
    assert splitter.feed(b"\nnext\n") == ["[1002 more bytes of that line dropped]", "next"]


def test_a_line_without_newline_is_flushed_at_end_of_stream() -> None:
    splitter = LineSplitter(4)
    assert splitter.feed(b"abcdef") == ["abcd [line truncated]"]
    assert splitter.flush() == ["[2 more bytes of that line dropped]"]


def test_binary_and_terminal_escapes_are_escaped() -> None:
    assert printable(b"\x00ok\x1b[31m\xff\tend") == r"\x00ok\x1b[31m\xff" + "\tend"
    assert printable("a\u2028b\u202ec".encode()) == r"a\u2028b\u202ec"  # forged line break, bidi
    assert printable("grüß".encode()) == "grüß"


def test_max_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LineSplitter(0)


@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(min_value=1, max_value=64))
def test_any_bytes_in_any_chunks_give_bounded_printable_lines(chunks: list[bytes], limit: int) -> None:
    splitter = LineSplitter(limit)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)] + splitter.flush()
    stream = b"".join(chunks)
    whole = stream.split(b"\n")
    assert len(lines) <= len(stream) // limit + len(whole) + 1
    for line in lines:
        assert not CONTROL.search(line)
        assert len(line) <= 6 * limit + len(" [line truncated]") or line.endswith("dropped]")


def test_throttle_passes_a_burst_then_counts_what_it_drops() -> None:
    now = [0.0]
    seen: list[str] = []
    throttle = Throttle(seen.append, rate=1.0, burst=3, clock=lambda: now[0])
    for n in range(10):
        throttle(f"line {n}")
    assert seen == ["line 0", "line 1", "line 2"] and throttle.dropped == 7
    now[0] += 1.0  # a token again: the count of the dropped, then the line
    throttle("line 10")
    assert seen[3:] == ["[7 lines dropped: output over 1 lines/s]", "line 10"]
    assert throttle.dropped == 0
