"""API timestamps as seconds since the epoch (deletion deadlines, pod ages)."""

from __future__ import annotations

import calendar

import pytest

from vkprovider.pods.context import parse_time


def test_an_api_timestamp_is_read_as_utc() -> None:
    expected = calendar.timegm((2026, 12, 5, 3, 59, 3, 0, 0, 0))
    assert parse_time("2026-12-05T03:59:03Z") == expected
    assert parse_time("2026-12-05T03:59:03.250000Z") == expected + 0.25


@pytest.mark.parametrize("value", [None, ""])
def test_no_timestamp_is_none(value: str | None) -> None:
    assert parse_time(value) is None


@pytest.mark.parametrize("value", ["2026-12-05T03:59:03", "yesterday", "2026-13-05T03:59:03Z"])
def test_a_value_that_is_no_utc_timestamp_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        parse_time(value)
