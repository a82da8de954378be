"""The API client's JSON codec (msgspec) against the standard library's, the independent truth.

What the service relies on: every document the apiserver sends decodes to exactly what
``json.loads`` gives, every body it writes is JSON that ``json.loads`` reads back unchanged,
and malformed input is a ``ValueError`` (the client maps it to ``KubeUnavailable``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vkprovider import jsoncodec

RECORDED = Path(__file__).parents[2] / "bench" / "data" / "pod_watch_events.jsonl"

#: what a Kubernetes object can hold: no NaN or infinities (JSON has none), 64-bit integers
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=20), inner, max_size=5),
    max_leaves=40,
)


def test_recorded_watch_events_decode_as_the_standard_library_does() -> None:
    lines = RECORDED.read_bytes().splitlines()
    assert lines
    for line in lines:
        assert jsoncodec.decode(line) == json.loads(line)
        assert jsoncodec.decode(line + b"\n") == json.loads(line)  # a watch line keeps its newline


@given(documents)
def test_what_it_encodes_the_standard_library_reads_back_unchanged(value: Any) -> None:
    assert json.loads(jsoncodec.encode(value)) == value


@given(documents)
def test_what_the_standard_library_writes_it_decodes_unchanged(value: Any) -> None:
    assert jsoncodec.decode(json.dumps(value).encode()) == value
    assert jsoncodec.decode(json.dumps(value, ensure_ascii=False).encode()) == value


def test_bodies_are_compact_utf8() -> None:
    body = {"message": "M\u00fcller's pod \u2192 ready", "count": 1, "items": [1, 2]}
    encoded = jsoncodec.encode(body)
    assert encoded == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "document",
    [b"<html>bad gateway</html>", b'{"type":"ADDED","object":{"metadata":', b"NaN", b"\xff\xfe{}", b""],
    ids=["html", "cut-short", "nan-literal", "not-utf8", "empty"],
)
def test_malformed_documents_are_value_errors(document: bytes) -> None:
    with pytest.raises(ValueError):
        jsoncodec.decode(document)
    assert issubclass(jsoncodec.DecodeError, ValueError)


def test_a_value_json_cannot_hold_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        jsoncodec.encode({"x": object()})


def test_a_float_nan_is_written_as_null_not_as_invalid_json() -> None:
    encoded = jsoncodec.encode({"x": math.nan})
    assert json.loads(encoded) == {"x": None}
