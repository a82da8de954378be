"""Log format and collapsing: what an on-call engineer greps during an incident."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from vkprovider import logs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger(f"test.logs.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield logger, stream, handler
    logger.removeHandler(handler)


def test_text_format_renders_extra_fields_context_first(
    captured: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = captured
    handler.setFormatter(logs.TextFormatter())
    logs.pod_action(
        logger, "deploy", "ok", pod="ns/web-1", uid="u-1", provider="cheap", offer="h100", attempts=2
    )
    logger.warning(
        "provider probe failed", extra={"error": "Transient: 503 Service Unavailable", "provider": "a"}
    )
    first, second = stream.getvalue().splitlines()
    assert first.endswith(
        "INFO    "
        + logger.name
        + ": deploy pod=ns/web-1 uid=u-1 provider=cheap offer=h100 outcome=ok attempts=2"
    )
    assert second.endswith('provider probe failed provider=a error="Transient: 503 Service Unavailable"')


def test_json_format_carries_every_extra_field(
    captured: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = captured
    handler.setFormatter(logs.JsonFormatter())
    logs.pod_action(
        logger,
        "failover",
        "NoCapacity",
        pod="ns/web-2",
        uid="u-2",
        provider="cheap",
        offer="h100",
        next="premium",
    )
    entry = json.loads(stream.getvalue())
    assert entry["msg"] == "failover" and entry["level"] == "info"
    assert {k: entry[k] for k in ("pod", "uid", "provider", "offer", "outcome", "next")} == {
        "pod": "ns/web-2",
        "uid": "u-2",
        "provider": "cheap",
        "offer": "h100",
        "outcome": "NoCapacity",
        "next": "premium",
    }


def test_repeated_identical_errors_collapse_to_first_then_a_count_per_window(
    captured: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = captured
    clock = Clock()
    handler.setFormatter(logs.TextFormatter())
    handler.addFilter(logs.CollapseFilter(60.0, clock=clock))
    for _ in range(30):  # one per second per provider, for 30 s
        logger.warning("catalog refresh failed", extra={"provider": "a", "error": "503"})
        logger.warning("catalog refresh failed", extra={"provider": "b", "error": "503"})
        logger.info("still serving")
        clock.now += 1
    clock.now += 31
    logger.warning("catalog refresh failed", extra={"provider": "a", "error": "503"})
    lines = stream.getvalue().splitlines()
    assert sum("provider=a" in line for line in lines) == 2
    assert sum("provider=b" in line for line in lines) == 1  # another provider is another line
    assert sum("still serving" in line for line in lines) == 30  # INFO is never collapsed
    assert "catalog refresh failed [29 more like this in 61s] provider=a" in lines[-1]


def test_collapsing_forgets_old_keys_so_memory_is_bounded() -> None:
    collapse = logs.CollapseFilter(60.0, clock=Clock())
    for i in range(5000):
        record = logging.LogRecord("x", logging.ERROR, "", 0, "error %d", (i,), None)
        assert collapse.filter(record)
    assert len(collapse._seen) <= 1024
