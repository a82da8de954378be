"""The prometheus signal turns every way a query can fail into "signal unavailable", naming the
query; here against Prometheus' response shapes (the real server is in tests/integration)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from vkprovider.errors import ConfigError
from vkprovider.gate.config import PrometheusSignalConfig
from vkprovider.gate.prom_signal import PrometheusSignal
from vkprovider.gate.signal import SignalUnavailable

NOW = 1_800_000_000.0
QUERY = 'free_local_gpus{job="exporter"}'


def vector(*values: Any, stamp: float = NOW) -> dict[str, Any]:
    result = [{"metric": {"i": str(i)}, "value": [stamp, str(v)]} for i, v in enumerate(values)]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def make(handler: Any) -> PrometheusSignal:
    client = httpx.AsyncClient(base_url="http://prom.test", transport=httpx.MockTransport(handler))
    cfg = PrometheusSignalConfig(url="http://prom.test", query=QUERY, max_sample_age_seconds=60)
    return PrometheusSignal(cfg, client=client, clock=lambda: NOW)


def answer(status: int, body: Any) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/query"
        assert request.url.params["query"] == QUERY
        return httpx.Response(status, json=body)

    return handler


async def test_one_series_is_the_reading() -> None:
    assert (await make(answer(200, vector(7))).read()).free_gpus == 7


async def test_a_scalar_is_the_reading() -> None:
    body = {"status": "success", "data": {"resultType": "scalar", "result": [NOW, "3"]}}
    assert (await make(answer(200, body)).read()).free_gpus == 3


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (200, vector(), "empty"),
        (200, vector(1, 2), "several_series"),
        (200, vector("NaN"), "nan"),
        (200, vector("+Inf"), "nan"),
        (200, vector(4, stamp=NOW - 600), "stale"),
        (503, {"status": "error", "errorType": "unavailable", "error": "overloaded"}, "http_error"),
        (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}, "bad_result"),
        (400, {"status": "error", "errorType": "bad_data", "error": "parse error"}, "bad_query"),
    ],
)
async def test_untrustworthy_answers_are_unavailable_and_name_the_query(
    status: int, body: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(SignalUnavailable) as err:
        await make(answer(status, body)).read()
    assert err.value.kind == kind
    assert QUERY in str(err.value)
    assert any(QUERY in r.getMessage() for r in caplog.records)


async def test_unreachable_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(SignalUnavailable) as err:
        await make(refuse).read()
    assert err.value.kind == "unreachable"


async def test_start_refuses_invalid_promql_naming_the_query() -> None:
    body = {"status": "error", "errorType": "bad_data", "error": '1:5: parse error: unexpected "}"'}
    with pytest.raises(ConfigError, match=r"gate\.signal\.prometheus\.query: .*free_local_gpus"):
        await make(answer(400, body)).start()


async def test_start_tolerates_an_unreachable_server() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    await make(refuse).start()  # the timeout rule handles an outage; it is not a config error


FRESH = "time() - max(timestamp(up))"


def with_freshness(free: Any, age: Any) -> PrometheusSignal:
    def handler(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        if query == FRESH:
            return httpx.Response(400 if age.get("errorType") == "bad_data" else 200, json=age)
        assert query == QUERY
        return httpx.Response(200, json=free)

    client = httpx.AsyncClient(base_url="http://prom.test", transport=httpx.MockTransport(handler))
    cfg = PrometheusSignalConfig(
        url="http://prom.test", query=QUERY, freshness_query=FRESH, max_sample_age_seconds=60
    )
    return PrometheusSignal(cfg, client=client, clock=lambda: NOW)


async def test_fresh_inputs_give_the_reading() -> None:
    assert (await with_freshness(vector(5), vector(12)).read()).free_gpus == 5


async def test_inputs_older_than_the_limit_are_stale_though_the_result_is_stamped_now() -> None:
    with pytest.raises(SignalUnavailable) as err:
        await with_freshness(vector(5), vector(200)).read()
    assert err.value.kind == "stale"
    assert "200s old (max 60s" in str(err.value) and FRESH in str(err.value)


async def test_no_input_sample_at_all_is_empty_naming_the_freshness_query() -> None:
    with pytest.raises(SignalUnavailable) as err:
        await with_freshness(vector(5), vector()).read()
    assert err.value.kind == "empty" and FRESH in str(err.value)


async def test_start_refuses_an_invalid_freshness_query_naming_its_field() -> None:
    bad = {"status": "error", "errorType": "bad_data", "error": "parse error"}
    with pytest.raises(ConfigError, match=r"gate\.signal\.prometheus\.freshness_query: .*timestamp\(up\)"):
        await with_freshness(vector(5), bad).start()


def test_the_built_in_queries_bring_their_freshness_query_and_a_custom_one_none() -> None:
    from vkprovider.gate.prom_queries import DCGM_FRESHNESS_QUERY, DCGM_QUERY, KSM_FRESHNESS_QUERY

    assert PrometheusSignalConfig().freshness == KSM_FRESHNESS_QUERY
    assert PrometheusSignalConfig(query=DCGM_QUERY).freshness == DCGM_FRESHNESS_QUERY
    assert PrometheusSignalConfig(query=QUERY).freshness == ""
    assert PrometheusSignalConfig(freshness_query="").freshness == ""
