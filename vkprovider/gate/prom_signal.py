"""The production signal: one instant PromQL query whose single value is the free local GPUs,
and one whose value is how old its inputs are (``prom_queries.py``).

Anything that is not exactly one finite, fresh number is "signal unavailable", logged with the
query, so an operator can paste it into the Prometheus UI: an unreachable server, an HTTP
error, an empty vector (Prometheus marks the series of a vanished target stale, so a dead
exporter shows up here), several series, NaN/Inf, or inputs older than
``max_sample_age_seconds`` (by the freshness query; also a result stamped that long ago, which
only a source with a lagging clock does). A query Prometheus cannot parse is refused at start-up,
naming the field it came from.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import httpx

from vkprovider.errors import ConfigError
from vkprovider.gate.config import PrometheusSignalConfig
from vkprovider.gate.signal import Reading, SignalUnavailable

log = logging.getLogger(__name__)


class PrometheusSignal:
    kind = "prometheus"

    def __init__(
        self,
        config: PrometheusSignalConfig,
        *,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._client = client or httpx.AsyncClient(base_url=config.url, timeout=config.timeout_seconds)
        self._clock = clock

    @property
    def query(self) -> str:
        return self._config.query

    async def start(self) -> None:
        """Refuse a query Prometheus rejects as bad_data; an unreachable server is not a config
        error (it is the failure the timeout handles), so start-up goes on."""
        queries = {"query": self.query, "freshness_query": self._config.freshness}
        for field, query in queries.items():
            if not query:
                continue
            try:
                await self._number(query)
            except SignalUnavailable as exc:
                if exc.kind == "bad_query":
                    raise ConfigError(f"gate.signal.prometheus.{field}: {exc}") from None
                log.warning("prometheus signal not available at start-up: %s", exc)
                return

    async def close(self) -> None:
        await self._client.aclose()

    def _fail(self, kind: str, why: str, query: str | None = None) -> SignalUnavailable:
        message = f"prometheus query {query or self.query!r} at {self._config.url}: {why}"
        log.warning("signal unavailable (%s): %s", kind, message, extra={"signal_error": kind})
        return SignalUnavailable(kind, message)

    async def read(self) -> Reading:
        free = await self._number(self.query)
        freshness = self._config.freshness
        if freshness:
            age = await self._number(freshness)
            if age > self._config.max_sample_age_seconds:
                raise self._fail(
                    "stale",
                    f"its inputs are {age:.0f}s old (max {self._config.max_sample_age_seconds:.0f}s; "
                    f"freshness query {freshness!r})",
                )
        return Reading(free_gpus=free)

    async def _number(self, query: str) -> float:
        try:
            resp = await self._client.get("/api/v1/query", params={"query": query})
        except httpx.HTTPError as exc:
            raise self._fail("unreachable", f"{type(exc).__name__}: {exc}", query) from None
        body: Any
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code == 400 and isinstance(body, dict) and body.get("errorType") == "bad_data":
            raise self._fail("bad_query", f"invalid PromQL: {body.get('error')}", query)
        if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) else resp.text[:200]
            raise self._fail("http_error", f"HTTP {resp.status_code}: {detail}", query)
        return self._value(body.get("data") or {}, query)

    def _value(self, data: dict[str, Any], query: str) -> float:
        result_type, result = data.get("resultType"), data.get("result")
        sample: Any
        if result_type == "scalar":
            sample = result
        elif result_type == "vector":
            if not result:
                raise self._fail("empty", "empty vector (no series: is the exporter scraped?)", query)
            if len(result) > 1:
                raise self._fail("several_series", f"{len(result)} series; the query must return one", query)
            sample = result[0].get("value")
        else:
            raise self._fail(
                "bad_result", f"result type {result_type!r}; want a scalar or one-series vector", query
            )
        try:
            stamp, value = float(sample[0]), float(sample[1])
        except (TypeError, ValueError, IndexError):
            raise self._fail("bad_result", f"cannot read sample {sample!r}", query) from None
        if not math.isfinite(value):
            raise self._fail("nan", f"value is {sample[1]}", query)
        age = self._clock() - stamp
        if age > self._config.max_sample_age_seconds:
            raise self._fail(
                "stale",
                f"result is stamped {age:.0f}s ago (max {self._config.max_sample_age_seconds:.0f}s)",
                query,
            )
        return value
