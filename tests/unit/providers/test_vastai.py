"""Vast.ai adapter against respx mocks built from the published OpenAPI document.

Request bodies are validated against the spec's request schemas; mock responses are assembled
from the spec's published examples (whole examples where the spec has them, per-property
``example``s otherwise) and validated against its response schemas before use.
"""

from __future__ import annotations

import copy
import json
import logging
import shlex
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx
from openapi import OpenApiDoc, vastai
from vkprovider_vastai.adapter import VastAiProvider

from vkprovider.plugins.api import (
    Container,
    DeploymentRequest,
    EnvVar,
    FileMount,
    InvalidRequest,
    LogOptions,
    NoCapacity,
    NotFound,
    Phase,
    Port,
    ProviderError,
    QuotaOrBilling,
    RegistryCredential,
    SupportsLogs,
    Transient,
)

BASE = "https://console.vast.ai"
KEY = "vast_TESTKEY_never_log_9876543210"
NODE = "vk-external"
LIST = "/api/v1/instances"
S3 = "https://s3.amazonaws.com/vast.ai/instance_logs/abc.log"


@pytest.fixture
def spec() -> OpenApiDoc:
    return vastai()


def make_provider(**settings: Any) -> VastAiProvider:
    settings.setdefault("api_key", KEY)
    settings.setdefault("log_fetch_interval_seconds", 0)
    return VastAiProvider("vast-test", VastAiProvider.Settings(**settings))


@pytest.fixture
async def provider() -> AsyncIterator[VastAiProvider]:
    adapter = make_provider()
    try:
        yield adapter
    finally:
        await adapter.close()


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def request_for(uid: str = "uid-1", **changes: Any) -> DeploymentRequest:
    base: dict[str, Any] = {
        "uid": uid,
        "namespace": "serving",
        "name": "llm-0",
        "node_name": NODE,
        "containers": [
            Container(
                name="server",
                image="vllm/vllm-openai:v0.6.0",
                command=["python", "-m", "vllm.entrypoints.openai.api_server"],
                args=["--model", "meta-llama/Llama-3-8B"],
                env=[EnvVar(name="HF_TOKEN", value="hf secret$", secret=True)],
                ports=[Port(container_port=8000)],
            )
        ],
        "gpu_type": "RTX-4090-24GB",
        "gpu_count": 1,
        "offer_id": "12345678",
    }
    base.update(changes)
    return DeploymentRequest(**base)


def bundle(spec: OpenApiDoc, **changes: Any) -> Any:
    """The published search-result example (one offer), adjusted."""
    offer = copy.deepcopy(spec.response_example("post", "/api/v0/bundles", 200)["offers"])
    offer.update(changes)
    return offer


def offers_response(spec: OpenApiDoc, offers: list[Any]) -> httpx.Response:
    body = {"offers": offers}
    spec.validate_response("post", "/api/v0/bundles", 200, body)
    return httpx.Response(200, json=body)


def listed(
    spec: OpenApiDoc, *, uid: str, instance_id: int, status: str | None = "running", node: str = NODE
) -> Any:
    """A list-endpoint instance (from the published property examples), labelled as ours."""
    page = spec.example_from_schema(spec.response_schema("get", LIST, 200))
    instance = page["instances"][0]
    instance.update(id=instance_id, actual_status=status, label=f"vkprovider:{node}:{uid}")
    instance["extra_env"] = [["VKPROVIDER_CONTAINER_NAME", "server"], ["-p 8000:8000", "1"]]
    instance["ports"] = {"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "41000"}]}
    return instance


def page(spec: OpenApiDoc, instances: list[Any], next_token: str | None = None) -> httpx.Response:
    body = {
        "success": True,
        "instances_found": len(instances),
        "next_token": next_token,
        "instances": instances,
    }
    spec.validate_response("get", LIST, 200, body)
    return httpx.Response(200, json=body)


def shown(spec: OpenApiDoc, instance: Any) -> httpx.Response:
    """``GET /api/v0/instances/{id}`` wraps the instance in ``instances``."""
    detail = spec.example_from_schema(spec.response_schema("get", "/api/v0/instances/{id}", 200))["instances"]
    detail.update({k: v for k, v in instance.items() if k in ("id", "actual_status", "label", "status_msg")})
    detail["os_version"] = "18.04"  # the spec's own example is a YAML float, its schema says string
    body = {"instances": detail}
    spec.validate_response("get", "/api/v0/instances/{id}", 200, body)
    return httpx.Response(200, json=body)


def created(spec: OpenApiDoc, contract: int) -> httpx.Response:
    body = spec.example_from_schema(spec.response_schema("put", "/api/v0/asks/{id}", 200))
    body["new_contract"] = contract
    spec.validate_response("put", "/api/v0/asks/{id}", 200, body)
    return httpx.Response(200, json=body)


def error(spec: OpenApiDoc, method: str, path: str, status: int, **changes: Any) -> httpx.Response:
    body = spec.example_from_schema(spec.response_schema(method, path, status))
    body.update(changes)
    spec.validate_response(method, path, status, body)
    headers = changes.pop("headers", None) if "headers" in changes else None
    return httpx.Response(status, json=body, headers=headers)


# --- offers -------------------------------------------------------------------------------------


async def test_offers_from_the_published_search_example(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    route = api.post("/api/v0/bundles").mock(return_value=offers_response(spec, [bundle(spec)]))

    offers = await provider.offers()

    query = json.loads(route.calls.last.request.content)
    spec.validate_request("post", "/api/v0/bundles", query)
    assert (
        query["type"] == "ondemand"
        and query["rentable"] == {"eq": True}
        and query["verified"] == {"eq": True}
    )
    assert query["order"][0] == ["dph_total", "asc"]
    [offer] = offers
    assert offer.offer_id == "12345678"
    assert offer.gpu_count == 4
    assert offer.gpu_memory_gb == 24.0  # gpu_ram 24576 MB
    assert offer.gpu_type == "IMAGINARY-RTX-9999-24GB"
    assert offer.price_per_hour == pytest.approx(0.234567)
    assert offer.region == "AT"
    assert offer.capacity == 1 and offer.spot is False
    assert offer.cpu == 32 and offer.memory_gb == 64.0


async def test_the_spec_example_shape_of_a_bare_offer_object_is_accepted(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.post("/api/v0/bundles").respond(200, json=spec.response_example("post", "/api/v0/bundles", 200))
    assert [o.offer_id for o in await provider.offers()] == ["12345678"]


async def test_interruptible_offers_and_filters(api: respx.MockRouter, spec: OpenApiDoc) -> None:
    adapter = make_provider(
        interruptible=True, gpu_names=["RTX 4090"], num_gpus=[1, 2], countries=["US"], max_price_per_hour=2.0
    )
    route = api.post("/api/v0/bundles").mock(
        side_effect=[
            offers_response(spec, [bundle(spec, gpu_name="RTX 4090", num_gpus=1)]),
            offers_response(spec, [bundle(spec, gpu_name="RTX 4090", num_gpus=1, id=7)]),
        ]
    )
    try:
        offers = await adapter.offers()
    finally:
        await adapter.close()
    ondemand, bid = (json.loads(call.request.content) for call in route.calls)
    for query in (ondemand, bid):
        spec.validate_request("post", "/api/v0/bundles", query)
        assert query["gpu_name"] == {"in": ["RTX 4090"]} and query["num_gpus"] == {"in": [1, 2]}
        assert query["geolocation"] == {"in": ["US"]} and query["dph_total"] == {"lte": 2.0}
    assert (ondemand["type"], bid["type"]) == ("ondemand", "bid")
    assert [(o.offer_id, o.spot, o.gpu_type) for o in offers] == [
        ("12345678", False, "RTX-4090-24GB"),
        ("7:bid", True, "RTX-4090-24GB"),
    ]
    assert offers[1].price_per_hour == pytest.approx(0.111111 * 1.1)


async def test_malformed_offers_are_skipped_and_logged(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc, caplog: pytest.LogCaptureFixture
) -> None:
    broken = bundle(spec, id=99)
    del broken["num_gpus"]
    api.post("/api/v0/bundles").mock(return_value=offers_response(spec, [broken, bundle(spec)]))
    with caplog.at_level(logging.WARNING):
        offers = await provider.offers()
    assert [o.offer_id for o in offers] == ["12345678"]
    assert "vast-test" in caplog.text and "malformed offer" in caplog.text


# --- deploy -------------------------------------------------------------------------------------


async def test_deploy_accepts_the_ask_with_a_spec_valid_body(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    route = api.put("/api/v0/asks/12345678").mock(return_value=created(spec, 4242))

    status = await provider.deploy(request_for())

    body = json.loads(route.calls.last.request.content)
    spec.validate_request("put", "/api/v0/asks/{id}", body)
    assert body["image"] == "vllm/vllm-openai:v0.6.0"
    assert body["label"] == f"vkprovider:{NODE}:uid-1"
    assert body["runtype"] == "args" and body["cancel_unavail"] is True
    assert body["args"] == [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "meta-llama/Llama-3-8B",
    ]
    assert "price" not in body
    flags = shlex.split(body["env"])
    assert flags[:2] == ["-p", "8000:8000"]
    assert "HF_TOKEN=hf secret$" in flags and "VKPROVIDER_POD_UID=uid-1" in flags
    assert f"VKPROVIDER_NODE_NAME={NODE}" in flags
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"
    assert (status.phase, status.provider_id, status.uid, status.offer_id) == (
        Phase.PENDING,
        "4242",
        "uid-1",
        "12345678",
    )


async def test_deploy_on_an_interruptible_offer_bids_above_the_current_minimum(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    search = api.post("/api/v0/bundles").mock(
        return_value=offers_response(spec, [bundle(spec, id=77, min_bid=0.5)])
    )
    route = api.put("/api/v0/asks/77").mock(return_value=created(spec, 9))

    await provider.deploy(request_for(offer_id="77:bid", spot=True))

    query = json.loads(search.calls.last.request.content)
    assert query["type"] == "bid" and query["id"] == {"eq": 77}
    body = json.loads(route.calls.last.request.content)
    spec.validate_request("put", "/api/v0/asks/{id}", body)
    assert body["price"] == pytest.approx(0.55)


async def test_deploy_without_offer_takes_the_cheapest_matching_one(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    api.post("/api/v0/bundles").mock(
        return_value=offers_response(
            spec,
            [
                bundle(spec, id=1, gpu_name="RTX 4090", num_gpus=1, dph_total=0.9),
                bundle(spec, id=2, gpu_name="RTX 4090", num_gpus=1, dph_total=0.4),
                bundle(spec, id=3, gpu_name="RTX 4090", num_gpus=2, dph_total=0.1),
                bundle(spec, id=4, gpu_name="RTX 3090", num_gpus=1, dph_total=0.05),
            ],
        )
    )
    route = api.put("/api/v0/asks/2").mock(return_value=created(spec, 10))
    status = await provider.deploy(request_for(offer_id=None))
    assert route.called and status.offer_id == "2"


async def test_deploy_without_matching_offer_is_no_capacity(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    api.post("/api/v0/bundles").mock(return_value=offers_response(spec, []))
    with pytest.raises(NoCapacity):
        await provider.deploy(request_for(offer_id=None))


async def test_registry_credentials_become_image_login(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    route = api.put("/api/v0/asks/12345678").mock(return_value=created(spec, 1))
    container = Container(name="c", image="ghcr.io/acme/llm:1")
    creds = [
        RegistryCredential(server="docker.io", username="u0", password="p0"),
        RegistryCredential(server="ghcr.io", username="bot", password="s3cret"),
    ]
    await provider.deploy(request_for(containers=[container], registry_credentials=creds))
    body = json.loads(route.calls.last.request.content)
    spec.validate_request("put", "/api/v0/asks/{id}", body)
    assert body["image_login"] == "-u bot -p s3cret ghcr.io"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"containers": [Container(name="a", image="x"), Container(name="b", image="y")]}, "spec.containers"),
        ({"init_containers": [Container(name="i", image="x")]}, "spec.initContainers"),
        ({"containers": [Container(name="a", image="x", files=[FileMount(path="/etc/a")])]}, "volumeMounts"),
        (
            {"containers": [Container(name="a", image="x", ports=[Port(container_port=9, protocol="SCTP")])]},
            "SCTP",
        ),
        ({"gpu_count": 0}, "nvidia.com/gpu"),
        ({"offer_id": "abc"}, "offer_id"),
    ],
)
async def test_unsupported_requests_fail_clearly_and_rent_nothing(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc, changes: dict[str, Any], field: str
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    create = api.put(url__regex=r"/api/v0/asks/\d+$")
    with pytest.raises(InvalidRequest, match=field.replace(".", r"\.")):
        await provider.deploy(request_for(**changes))
    assert not create.called


# --- get / list / delete ------------------------------------------------------------------------


async def test_list_pages_through_instances_and_is_scoped_to_the_node(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    foreign = spec.example_from_schema(spec.response_schema("get", LIST, 200))["instances"][0]
    route = api.get(LIST).mock(
        side_effect=[
            page(spec, [listed(spec, uid="a", instance_id=1), foreign], next_token="tok-2"),
            page(
                spec,
                [listed(spec, uid="b", instance_id=2, node="other"), listed(spec, uid="c", instance_id=3)],
            ),
        ]
    )

    statuses = await provider.list(NODE)

    assert [s.uid for s in statuses] == ["a", "c"]
    assert route.calls[1].request.url.params["after_token"] == "tok-2"
    first = statuses[0]
    assert first.phase is Phase.RUNNING and first.ready
    assert first.ip == "192.0.2.45" and first.endpoint == "192.0.2.45:41000"
    assert first.containers[0].name == "server"
    assert first.price_per_hour == pytest.approx(0.8021)
    assert first.node_name == NODE


async def test_get_uses_the_cached_id_and_handles_a_vanished_instance(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    mine = listed(spec, uid="uid-1", instance_id=4242, status="loading")
    instances = [mine]
    listing = api.get(LIST).mock(side_effect=lambda request: page(spec, instances))
    show = api.get("/api/v0/instances/4242").mock(return_value=shown(spec, mine))

    assert (await provider.get("uid-1")).phase is Phase.PENDING
    assert (await provider.get("uid-1")).provider_id == "4242"
    assert listing.call_count == 1 and show.call_count == 1

    show.mock(return_value=httpx.Response(200, json={"instances": None}))
    instances.clear()
    with pytest.raises(NotFound):
        await provider.get("uid-1")


async def test_delete_destroys_and_unknown_uid_succeeds(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="uid-1", instance_id=4242)]))
    destroy = api.delete("/api/v0/instances/4242").respond(200, json={"success": True, "msg": "destroyed"})
    others = api.delete(url__regex=r"/api/v0/instances/(?!4242)\d+$")

    await provider.delete("uid-1")
    await provider.delete("unknown")

    assert destroy.call_count == 1 and not others.called


async def test_delete_of_an_instance_already_gone_succeeds(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="uid-1", instance_id=4242)]))
    api.delete("/api/v0/instances/4242").mock(
        return_value=error(spec, "delete", "/api/v0/instances/{id}", 404)
    )
    await provider.delete("uid-1")


# --- state mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "phase", "ready"),
    [
        (None, Phase.PENDING, False),
        ("loading", Phase.PENDING, False),
        ("created", Phase.PENDING, False),
        ("running", Phase.RUNNING, True),
        ("exited", Phase.FAILED, False),
        ("offline", Phase.FAILED, False),
        ("unknown", Phase.UNKNOWN, False),
    ],
)
async def test_actual_status_maps_to_a_phase(
    provider: VastAiProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    state: str | None,
    phase: Phase,
    ready: bool,
) -> None:
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="u", instance_id=1, status=state)]))
    status = await provider.get("u")
    assert (status.phase, status.ready) == (phase, ready)


async def test_unknown_status_is_unknown_and_logged_with_the_provider_name(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc, caplog: pytest.LogCaptureFixture
) -> None:
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="u", instance_id=1, status="hibernating")]))
    with caplog.at_level(logging.WARNING):
        status = await provider.get("u")
    assert status.phase is Phase.UNKNOWN
    assert "vast-test" in caplog.text and "hibernating" in caplog.text


@pytest.mark.parametrize("missing", ["id", "actual_status"])
async def test_an_instance_missing_fields_is_transient_and_logged(
    provider: VastAiProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    caplog: pytest.LogCaptureFixture,
    missing: str,
) -> None:
    instance = listed(spec, uid="u", instance_id=1)
    del instance[missing]
    api.get(LIST).respond(200, json={"success": True, "instances": [instance], "next_token": None})
    with caplog.at_level(logging.WARNING), pytest.raises(Transient):
        await provider.list(NODE)
    assert "vast-test" in caplog.text and missing in caplog.text


async def test_create_answer_without_new_contract_is_transient(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    api.put("/api/v0/asks/12345678").respond(200, json={"success": True, "id": 5})
    with pytest.raises(Transient, match="new_contract"):
        await provider.deploy(request_for())


# --- error mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "changes", "expected"),
    [
        (400, {"error": "invalid_args"}, InvalidRequest),
        (400, {"error": "invalid_price", "msg": "bid price too low"}, InvalidRequest),
        (400, {"error": "invalid_args", "msg": "Your credit balance is too low"}, QuotaOrBilling),
        (401, {}, QuotaOrBilling),
        (403, {}, NoCapacity),
        (404, {}, NoCapacity),
        (410, {}, NoCapacity),
        (429, {}, Transient),
    ],
)
async def test_create_errors_map_to_error_classes(
    provider: VastAiProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    status: int,
    changes: dict[str, Any],
    expected: type[ProviderError],
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    api.put("/api/v0/asks/12345678").mock(
        return_value=error(spec, "put", "/api/v0/asks/{id}", status, **changes)
    )
    with pytest.raises(ProviderError) as caught:
        await provider.deploy(request_for())
    assert type(caught.value) is expected
    assert caught.value.provider == "vast-test"


async def test_create_answering_success_false_is_an_error(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get(LIST).mock(return_value=page(spec, []))
    api.put("/api/v0/asks/12345678").respond(
        200, json={"success": False, "error": "invalid_args", "msg": "bad"}
    )
    with pytest.raises(InvalidRequest, match="bad"):
        await provider.deploy(request_for())


@pytest.mark.parametrize(
    ("status", "expected"), [(400, InvalidRequest), (404, QuotaOrBilling), (500, Transient), (503, Transient)]
)
async def test_search_errors_map_to_error_classes(
    provider: VastAiProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    status: int,
    expected: type[ProviderError],
) -> None:
    if status < 500:
        response = error(spec, "post", "/api/v0/bundles", status)
    else:
        response = httpx.Response(status, text="upstream error")
    api.post("/api/v0/bundles").mock(return_value=response)
    with pytest.raises(ProviderError) as caught:
        await provider.offers()
    assert type(caught.value) is expected


@pytest.mark.parametrize(
    ("status", "expected"), [(400, InvalidRequest), (401, QuotaOrBilling), (429, Transient)]
)
async def test_read_errors_map_to_error_classes(
    provider: VastAiProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    status: int,
    expected: type[ProviderError],
) -> None:
    api.get(LIST).mock(return_value=error(spec, "get", LIST, status))
    with pytest.raises(ProviderError) as caught:
        await provider.list(NODE)
    assert type(caught.value) is expected


async def test_429_honours_retry_after(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    body = spec.example_from_schema(spec.response_schema("get", LIST, 429))
    api.get(LIST).respond(429, json=body, headers={"Retry-After": "7"})
    with pytest.raises(Transient) as caught:
        await provider.list(NODE)
    assert caught.value.retry_after == 7
    assert "too frequent" in str(caught.value)


# --- secrets ------------------------------------------------------------------------------------


async def test_the_api_key_never_reaches_logs_reprs_errors_or_the_log_store(
    api: respx.MockRouter, spec: OpenApiDoc, caplog: pytest.LogCaptureFixture
) -> None:
    settings = VastAiProvider.Settings(api_key=KEY, log_fetch_interval_seconds=0)
    adapter = VastAiProvider("vast-test", settings)
    api.post("/api/v0/bundles").respond(404, json={"error": "auth_error", "msg": f"Invalid user key {KEY}"})
    api.get(LIST).mock(
        side_effect=[httpx.ConnectError(f"boom {KEY}"), page(spec, [listed(spec, uid="u", instance_id=1)])]
    )
    api.put("/api/v0/instances/request_logs/1").respond(200, json={"success": True, "result_url": S3})
    store = api.get(S3).respond(200, content=b"hello\n")
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for call in (adapter.offers(), adapter.list(NODE)):
            try:
                await call
            except ProviderError as exc:
                errors.append(f"{exc} {exc!r} {exc.args}")
        chunks = [c async for c in adapter.logs("u", LogOptions())]
    await adapter.close()
    assert chunks == [b"hello\n"] and len(errors) == 2
    assert "authorization" not in store.calls.last.request.headers
    for text in (caplog.text, *errors, repr(adapter), repr(settings), str(settings.model_dump())):
        assert KEY not in text


# --- logs ---------------------------------------------------------------------------------------


async def test_logs_fetch_the_uploaded_snapshot(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    assert isinstance(provider, SupportsLogs)
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="u", instance_id=1)]))
    answer = spec.example_from_schema(spec.response_schema("put", "/api/v0/instances/request_logs/{id}", 200))
    answer["result_url"] = S3
    spec.validate_response("put", "/api/v0/instances/request_logs/{id}", 200, answer)
    request_logs = api.put("/api/v0/instances/request_logs/1").respond(200, json=answer)
    store = api.get(S3).mock(
        side_effect=[httpx.Response(404), httpx.Response(200, content=b"line 1\nline 2\n")]
    )

    chunks = [c async for c in provider.logs("u", LogOptions(tail_lines=100, limit_bytes=9))]

    body = json.loads(request_logs.calls.last.request.content)
    spec.validate_request("put", "/api/v0/instances/request_logs/{id}", body)
    assert body == {"tail": "100"}
    assert store.call_count == 2
    assert chunks == [b"line 1\nli"]


async def test_logs_that_never_upload_are_not_found(api: respx.MockRouter, spec: OpenApiDoc) -> None:
    adapter = make_provider(log_fetch_attempts=2)
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="u", instance_id=1)]))
    api.put("/api/v0/instances/request_logs/1").respond(200, json={"success": True, "result_url": S3})
    api.get(S3).respond(404)
    with pytest.raises(NotFound):
        async for _ in adapter.logs("u", LogOptions()):
            pass
    await adapter.close()


class _Counted(httpx.AsyncByteStream):
    """A large uploaded log, served in 64 KiB chunks; counts how many were read."""

    def __init__(self, chunks: int) -> None:
        self.chunks, self.read = chunks, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.read += 1
            yield b"y" * 65536


async def test_the_log_snapshot_is_streamed_and_stops_at_limit_bytes(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    """Issue 21: the snapshot was read whole (``response.content``) before ``limitBytes`` cut it."""
    api.get(LIST).mock(return_value=page(spec, [listed(spec, uid="u", instance_id=1)]))
    api.put("/api/v0/instances/request_logs/1").respond(200, json={"success": True, "result_url": S3})
    body = _Counted(1000)  # 64 MiB
    store = api.get(S3).mock(return_value=httpx.Response(200, stream=body))
    chunks = [c async for c in provider.logs("u", LogOptions(limit_bytes=100))]
    assert b"".join(chunks) == b"y" * 100
    assert body.read <= 2  # not the 1000 chunks of the whole file
    assert "authorization" not in store.calls.last.request.headers  # the key never goes to the store


# --- endpoints ----------------------------------------------------------------------------------


async def test_endpoints_are_the_public_address_and_docker_port_map(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    mine = listed(spec, uid="uid-1", instance_id=4242)
    mine["public_ipaddr"] = "203.0.113.42"
    mine["ports"] = {
        "8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "41000"}],
        "9000/udp": [{"HostIp": "0.0.0.0", "HostPort": "41001"}],
        "bogus": [{"HostPort": "1"}],
    }
    api.get(LIST).mock(return_value=page(spec, [mine]))

    found = await provider.endpoints("uid-1")

    assert (await provider.info()).capabilities.endpoints
    assert found.uid == "uid-1" and found.addresses == ["203.0.113.42"]
    assert found.port_for(8000) == 41000
    assert found.port_for(9000, "UDP") == 41001 and found.port_for(9000) is None
    assert len(found.ports) == 2


async def test_endpoints_before_running_are_empty_and_unknown_uid_is_not_found(
    provider: VastAiProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    loading = listed(spec, uid="uid-1", instance_id=4242, status="loading")
    loading["ports"] = None  # only present on running instances
    api.get(LIST).mock(return_value=page(spec, [loading]))

    assert (await provider.endpoints("uid-1")).addresses == []
    with pytest.raises(NotFound):
        await provider.endpoints("uid-2")
