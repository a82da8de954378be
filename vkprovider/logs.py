"""Logging setup: plain text for people, JSON lines for machines, quiet during an incident.

Context travels in ``extra`` (``pod``, ``uid``, ``provider``, ``offer``, ``outcome``, ``error`` …)
and is rendered in both formats — as ``key=value`` after the message in text, as fields in JSON —
so every line about a pod or a provider can be found by grep or by query.

During an outage the same error repeats every probe interval for every provider; the
:class:`CollapseFilter` lets the first one through, counts the repeats, and reports the count
with the next occurrence once a window (60 s) has passed: ``… [142 more like this in 60s]``.

Secret values are never passed to loggers: the models' ``repr`` hides env values, file contents
and registry passwords.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import OrderedDict
from typing import Any

#: Printed first, in this order, when present; any other ``extra`` field follows alphabetically.
CONTEXT_FIELDS = ("pod", "uid", "provider", "offer", "node", "outcome")
COLLAPSE_SECONDS = 60.0
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_MAX_KEYS = 1024


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` a caller passed, context fields first; None values are left out."""
    extras = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
    ordered = {k: extras.pop(k) for k in CONTEXT_FIELDS if k in extras}
    ordered.update(sorted(extras.items()))
    return {k: v for k, v in ordered.items() if v is not None}


def _text_value(value: Any) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """``2026-01-02 03:04:05,678 WARNING vkprovider.node.probe: provider probe failed provider=a error="…"``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = extra_fields(record)
        if not fields:
            return line
        head, sep, trace = line.partition("\n")  # keep a traceback below the fields
        rendered = " ".join(f"{k}={_text_value(v)}" for k, v in fields.items())
        return f"{head} {rendered}{sep}{trace}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in extra_fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class CollapseFilter(logging.Filter):
    """Pass the first of identical WARNING+ records, count the rest for ``window`` seconds, and
    append the count to the first one let through after the window.

    Identical means same logger, level, rendered message and ``extra`` fields."""

    def __init__(self, window: float = COLLAPSE_SECONDS, *, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self._clock = clock
        self._seen: OrderedDict[tuple[Any, ...], list[float]] = OrderedDict()  # key -> [start, count]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage(), repr(extra_fields(record)))
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} [{int(seen[1])} more like this in {now - seen[0]:.0f}s]"
            record.args = ()
        self._seen[key] = [now, 0]
        self._seen.move_to_end(key)
        while len(self._seen) > _MAX_KEYS:
            self._seen.popitem(last=False)
        return True


def pod_action(
    logger: logging.Logger,
    action: str,
    outcome: str,
    *,
    pod: str,
    uid: str,
    provider: str | None = None,
    offer: str | None = None,
    level: int = logging.INFO,
    **fields: Any,
) -> None:
    """The one line per deploy / delete / failover / restart / orphan deletion an incident
    timeline is built from: ``deploy pod=ns/web-1 uid=… provider=a offer=h100 outcome=ok``
    (``action`` is the message, so ``grep 'deploy pod='`` finds every deploy)."""
    logger.log(
        level,
        action,
        extra={"pod": pod, "uid": uid, "provider": provider, "offer": offer, "outcome": outcome, **fields},
    )


def configure(
    level: str = "INFO", *, json_lines: bool = False, collapse_seconds: float = COLLAPSE_SECONDS
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    if collapse_seconds > 0:
        handler.addFilter(CollapseFilter(collapse_seconds))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "uvicorn.access", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
