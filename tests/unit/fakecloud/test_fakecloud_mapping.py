"""Error mapping and response validation, with an injected transport (no server needed)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from fakecloud_helpers import request
from vkprovider_fakecloud.adapter import FakeCloudProvider

from vkprovider.plugins.api import (
    InvalidRequest,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
)

Handler = Callable[[httpx.Request], httpx.Response]


def _adapter(handler: Handler) -> FakeCloudProvider:
    settings = FakeCloudProvider.Settings(url="http://fake.invalid")
    return FakeCloudProvider("mock", settings, transport=httpx.MockTransport(handler))


def _error(status: int, code: str = "", headers: dict[str, str] | None = None) -> Handler:
    body = {"error": {"code": code, "message": "nope"}} if code else {"detail": "x"}
    return lambda _: httpx.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (_error(400, "InvalidRequest"), InvalidRequest),
        (_error(422), InvalidRequest),
        (_error(409, "NoCapacity"), NoCapacity),
        (_error(503, "NoCapacity"), NoCapacity),
        (_error(402, "QuotaOrBilling"), QuotaOrBilling),
        (_error(403), QuotaOrBilling),
        (_error(404, "NotFound"), NotFound),
        (_error(429, "RateLimited", {"Retry-After": "3"}), Transient),
        (_error(500), Transient),
        (_error(504), Transient),
        (_error(418), InvalidRequest),  # the shared table: any other 4xx is the request's fault
        (lambda _: httpx.Response(200, text="<html>not json</html>"), Transient),
        (lambda _: httpx.Response(200, json={"uid": "x", "phase": "Exploded"}), Transient),
        (lambda _: httpx.Response(200, json={"phase": "Running"}), Transient),
        (lambda _: httpx.Response(200, json=[1, 2]), Transient),
    ],
)
async def test_get_maps_every_outcome_to_an_error_class(
    handler: Handler, expected: type[ProviderError]
) -> None:
    adapter = _adapter(handler)
    try:
        with pytest.raises(expected) as info:
            await adapter.get("x")
        assert info.value.provider == "mock"
    finally:
        await adapter.close()


async def test_transport_errors_are_transient() -> None:
    def broken(_: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow")

    adapter = _adapter(broken)
    try:
        with pytest.raises(Transient, match="timed out"):
            await adapter.offers()
    finally:
        await adapter.close()


async def test_delete_of_unknown_succeeds_but_other_errors_do_not() -> None:
    adapter = _adapter(_error(404, "NotFound"))
    await adapter.delete("gone")
    await adapter.close()
    adapter = _adapter(_error(500))
    with pytest.raises(Transient):
        await adapter.delete("x")
    await adapter.close()


async def test_malformed_offers_and_list_are_transient_with_the_provider_name() -> None:
    adapter = _adapter(lambda _: httpx.Response(200, json=[{"offer_id": "a", "gpu_type": "T4"}]))
    try:
        with pytest.raises(Transient) as info:
            await adapter.offers()
        assert str(info.value).startswith("mock: malformed response")
        with pytest.raises(Transient):
            await adapter.list("vk")
    finally:
        await adapter.close()


async def test_error_messages_never_echo_the_request() -> None:
    adapter = _adapter(_error(400, "InvalidRequest"))
    try:
        with pytest.raises(InvalidRequest) as info:
            await adapter.deploy(request("x"))
        assert "s3cret-token" not in str(info.value)
    finally:
        await adapter.close()


async def test_deploy_sends_labels_and_list_filters_by_node() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json=[])

    adapter = _adapter(handler)
    try:
        await adapter.list("vk-7")
    finally:
        await adapter.close()
    assert seen[0].url.params["labelSelector"] == "vkprovider.io/node-name=vk-7"


async def test_retry_after_is_carried_on_429_and_5xx() -> None:
    for status in (429, 503):
        adapter = _adapter(_error(status, "Busy", {"Retry-After": "4"}))
        try:
            with pytest.raises(Transient) as info:
                await adapter.probe()
            assert info.value.retry_after == 4 and f"HTTP {status} Busy: nope" in str(info.value)
        finally:
            await adapter.close()
