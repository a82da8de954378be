"""RunPod adapter against respx mocks built from the published REST v2 OpenAPI document.

Every request body the adapter sends is validated against the spec's ``CreatePodRequest`` schema,
and every mocked response is first validated against the spec's response schema, so the tests
fail if either side drifts from the published shapes.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx
from openapi import OpenApiDoc, runpod
from vkprovider_runpod.adapter import RunPodProvider

from vkprovider.plugins.api import (
    Container,
    DeploymentRequest,
    EnvVar,
    InvalidRequest,
    LogOptions,
    NoCapacity,
    NotFound,
    Phase,
    Port,
    ProviderError,
    QuotaOrBilling,
    SupportsLogs,
    Transient,
)

BASE = "https://api.runpod.io"
KEY = "rpa_TESTKEY_do_not_log_0123456789"
NODE = "vk-external"


@pytest.fixture
def spec() -> OpenApiDoc:
    return runpod()


@pytest.fixture
async def provider() -> AsyncIterator[RunPodProvider]:
    adapter = RunPodProvider("runpod-test", RunPodProvider.Settings(api_key=KEY, cloud_types=["SECURE"]))
    try:
        yield adapter
    finally:
        await adapter.close()


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def request_for(uid: str = "uid-1", node: str = NODE, **changes: Any) -> DeploymentRequest:
    base: dict[str, Any] = {
        "uid": uid,
        "namespace": "serving",
        "name": "llm-0",
        "node_name": node,
        "containers": [
            Container(
                name="server",
                image="vllm/vllm-openai:v0.6.0",
                command=["python", "-m", "vllm.entrypoints.openai.api_server"],
                args=["--model", "meta-llama/Llama-3-8B"],
                env=[EnvVar(name="HF_TOKEN", value="hf_secret", secret=True), EnvVar(name="A", value="1")],
                ports=[Port(container_port=8000, name="http")],
            )
        ],
        "gpu_type": "RTX-4090-24GB",
        "gpu_count": 1,
        "offer_id": "SECURE/US-KS-2/NVIDIA GeForce RTX 4090/1",
    }
    base.update(changes)
    return DeploymentRequest(**base)


def pod_json(spec: OpenApiDoc, *, uid: str, pod_id: str, status: str = "RUNNING", node: str = NODE) -> Any:
    """A spec-valid ``Pod`` (the published example) re-labelled as one of ours."""
    pod = copy.deepcopy(spec.response_example("get", "/v2/pods/{id}", 200))
    pod.update(id=pod_id, name=f"vk-{uid}", status=status)
    pod["env"] = {
        "A": "1",
        "VKPROVIDER_POD_UID": uid,
        "VKPROVIDER_NODE_NAME": node,
        "VKPROVIDER_POD_NAMESPACE": "serving",
        "VKPROVIDER_POD_NAME": "llm-0",
        "VKPROVIDER_CONTAINER_NAME": "server",
    }
    spec.validate_schema("Pod", pod)
    return pod


def pods_response(spec: OpenApiDoc, pods: list[Any]) -> httpx.Response:
    body = {"pods": pods}
    spec.validate_response("get", "/v2/pods", 200, body)
    return httpx.Response(200, json=body)


def problem(spec: OpenApiDoc, status: int, detail: str, **headers: str) -> httpx.Response:
    body = {"title": "Error", "status": status, "detail": detail}
    spec.validate_schema("ErrorResponse", body)
    return httpx.Response(status, json=body, headers=headers)


def foreign_pod(spec: OpenApiDoc) -> Any:
    """Somebody else's pod in the same account (the spec example, untouched)."""
    return copy.deepcopy(spec.response_example("get", "/v2/pods", 200)["pods"][0])


# --- offers -------------------------------------------------------------------------------------


async def test_offers_from_the_published_catalog_example(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    catalog = spec.response_example("get", "/v2/catalog/gpus", 200)
    spec.validate_response("get", "/v2/catalog/gpus", 200, catalog)
    route = api.get("/v2/catalog/gpus").respond(200, json=catalog)

    offers = await provider.offers()

    params = route.calls.last.request.url.params
    assert (params["include"], params["product"], params["cloud"]) == ("AVAILABILITY", "POD", "SECURE")
    assert [o.gpu_count for o in offers] == [1, 2, 4, 8]  # gpu_counts up to maxCount.secure = 8
    first = offers[0]
    assert first.gpu_type == "RTX-4090-24GB"
    assert first.region == "US-KS-2"
    assert first.gpu_memory_gb == 24
    assert first.capacity == 10  # HIGH
    assert first.provider == "runpod-test"
    assert offers[3].price_per_hour == pytest.approx(0.44 * 8)
    assert first.offer_id == "SECURE/US-KS-2/NVIDIA GeForce RTX 4090/1"


async def test_offers_respect_max_count_stock_and_skip_malformed_entries(
    api: respx.MockRouter, spec: OpenApiDoc, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = copy.deepcopy(spec.response_example("get", "/v2/catalog/gpus", 200))
    gpu = catalog["gpus"][0]
    gpu["maxCount"]["community"] = 2
    gpu["dataCenters"] = [
        {"id": "US-KS-2", "name": "Kansas", "availability": "LOW"},
        {"id": "EU-RO-1", "name": "Romania", "availability": "NONE"},
    ]
    catalog["gpus"].append({"id": "broken"})  # missing required fields
    api.get("/v2/catalog/gpus").respond(200, json=catalog)
    adapter = RunPodProvider("rp", RunPodProvider.Settings(api_key=KEY, cloud_types=["COMMUNITY"]))
    try:
        with caplog.at_level(logging.WARNING):
            offers = await adapter.offers()
    finally:
        await adapter.close()
    assert [(o.gpu_count, o.region, o.capacity) for o in offers] == [(1, "US-KS-2", 1), (2, "US-KS-2", 1)]
    assert offers[1].price_per_hour == pytest.approx(0.31 * 2)
    assert offers[0].offer_id.startswith("COMMUNITY/")
    assert "provider rp" in caplog.text and "malformed catalog entry" in caplog.text


# --- deploy -------------------------------------------------------------------------------------


async def test_deploy_sends_a_spec_valid_create_request(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get("/v2/pods").respond(200, json={"pods": [foreign_pod(spec)]})
    created = pod_json(spec, uid="uid-1", pod_id="pod_new", status="PROVISIONING")
    spec.validate_response("post", "/v2/pods", 201, created)
    create = api.post("/v2/pods").respond(201, json=created)

    status = await provider.deploy(request_for())

    body = json.loads(create.calls.last.request.content)
    spec.validate_request("post", "/v2/pods", body)
    assert body["name"] == "vk-uid-1"
    assert body["gpu"] == {"id": "NVIDIA GeForce RTX 4090", "count": 1}
    assert body["cloud"] == "SECURE"
    assert body["dataCenterIds"] == ["US-KS-2"]
    assert body["ports"] == ["8000/http"]
    assert body["image"] == "vllm/vllm-openai:v0.6.0"
    assert body["args"] == "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3-8B"
    assert body["env"]["HF_TOKEN"] == "hf_secret"
    assert body["env"]["VKPROVIDER_POD_UID"] == "uid-1"
    assert body["env"]["VKPROVIDER_NODE_NAME"] == NODE
    assert create.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"
    assert status.phase is Phase.PENDING
    assert status.provider_id == "pod_new"
    assert status.uid == "uid-1" and status.node_name == NODE


async def test_deploy_without_offer_picks_the_cheapest_matching_catalog_entry(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    catalog = copy.deepcopy(spec.response_example("get", "/v2/catalog/gpus", 200))
    dear = copy.deepcopy(catalog["gpus"][0])
    dear["price"]["secure"] = 9.0
    dear["dataCenters"][0]["id"] = "EU-SE-1"
    catalog["gpus"].insert(0, dear)
    api.get("/v2/catalog/gpus").respond(200, json=catalog)
    api.get("/v2/pods").respond(200, json={"pods": []})
    create = api.post("/v2/pods").respond(201, json=pod_json(spec, uid="uid-1", pod_id="p1"))

    await provider.deploy(request_for(offer_id=None, gpu_count=2))

    body = json.loads(create.calls.last.request.content)
    spec.validate_request("post", "/v2/pods", body)
    assert body["dataCenterIds"] == ["US-KS-2"]
    assert body["gpu"]["count"] == 2


async def test_deploy_without_any_matching_offer_is_no_capacity(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get("/v2/catalog/gpus").respond(200, json=spec.response_example("get", "/v2/catalog/gpus", 200))
    api.get("/v2/pods").respond(200, json={"pods": []})
    create = api.post("/v2/pods")
    with pytest.raises(NoCapacity):
        await provider.deploy(request_for(offer_id=None, gpu_type="H100-SXM-80GB"))
    assert not create.called


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"containers": [Container(name="a", image="x"), Container(name="b", image="y")]}, "spec.containers"),
        ({"init_containers": [Container(name="init", image="x")]}, "spec.initContainers"),
        (
            {"containers": [Container(name="a", image="x", ports=[Port(container_port=53, protocol="UDP")])]},
            "protocol",
        ),
        ({"gpu_count": 0}, "nvidia.com/gpu"),
        ({"offer_id": "nonsense"}, "offer_id"),
    ],
)
async def test_unsupported_requests_fail_clearly_and_deploy_nothing(
    provider: RunPodProvider, api: respx.MockRouter, changes: dict[str, Any], field: str
) -> None:
    api.get("/v2/pods").respond(200, json={"pods": []})
    create = api.post("/v2/pods")
    with pytest.raises(InvalidRequest, match=field.replace(".", r"\.").replace("[", r"\[")):
        await provider.deploy(request_for(**changes))
    assert not create.called


# --- get / list / delete ------------------------------------------------------------------------


async def test_list_is_scoped_to_the_node(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    pods = [
        pod_json(spec, uid="mine-1", pod_id="p1"),
        pod_json(spec, uid="other-node", pod_id="p2", node="vk-elsewhere"),
        foreign_pod(spec),
        pod_json(spec, uid="mine-2", pod_id="p3", status="STARTING"),
    ]
    api.get("/v2/pods").mock(return_value=pods_response(spec, pods))

    statuses = await provider.list(NODE)

    assert sorted((s.uid, s.phase) for s in statuses) == [
        ("mine-1", Phase.RUNNING),
        ("mine-2", Phase.PENDING),
    ]
    running = next(s for s in statuses if s.uid == "mine-1")
    assert running.ready and running.ip == "195.26.233.3" and running.endpoint == "195.26.233.3:34446"
    assert running.containers[0].name == "server"
    assert running.price_per_hour == pytest.approx(0.44)
    assert running.started_at is not None


async def test_delete_terminates_and_unknown_uid_succeeds(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get("/v2/pods").mock(return_value=pods_response(spec, [pod_json(spec, uid="uid-1", pod_id="pod_a")]))
    delete = api.delete("/v2/pods/pod_a").respond(204)
    other = api.delete(url__regex=r"/v2/pods/(?!pod_a).*")

    await provider.delete("uid-1")
    await provider.delete("unknown-uid")

    assert delete.call_count == 1
    assert not other.called


async def test_delete_of_a_pod_that_disappeared_meanwhile_succeeds(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    api.get("/v2/pods").mock(return_value=pods_response(spec, [pod_json(spec, uid="uid-1", pod_id="pod_a")]))
    api.delete("/v2/pods/pod_a").mock(return_value=problem(spec, 404, "pod not found"))
    await provider.delete("uid-1")


# --- state mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "phase", "ready"),
    [
        ("PROVISIONING", Phase.PENDING, False),
        ("STARTING", Phase.PENDING, False),
        ("RUNNING", Phase.RUNNING, True),
        ("EXITED", Phase.FAILED, False),
        ("ERROR", Phase.FAILED, False),
        ("TERMINATED", Phase.FAILED, False),
    ],
)
async def test_every_published_status_maps_to_a_phase(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc, state: str, phase: Phase, ready: bool
) -> None:
    assert state in spec.doc["components"]["schemas"]["PodStatus"]["enum"]
    api.get("/v2/pods").mock(
        return_value=pods_response(spec, [pod_json(spec, uid="u", pod_id="p", status=state)])
    )
    status = await provider.get("u")
    assert (status.phase, status.ready) == (phase, ready)


async def test_unknown_status_is_unknown_and_logged_with_the_provider_name(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc, caplog: pytest.LogCaptureFixture
) -> None:
    pod = pod_json(spec, uid="u", pod_id="p")
    pod["status"] = "HIBERNATING"
    api.get("/v2/pods").respond(200, json={"pods": [pod]})
    with caplog.at_level(logging.WARNING):
        status = await provider.get("u")
    assert status.phase is Phase.UNKNOWN
    assert "runpod-test" in caplog.text and "HIBERNATING" in caplog.text


@pytest.mark.parametrize("missing", ["id", "status"])
async def test_a_pod_missing_fields_is_transient_and_logged(
    provider: RunPodProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    caplog: pytest.LogCaptureFixture,
    missing: str,
) -> None:
    pod = pod_json(spec, uid="u", pod_id="p")
    del pod[missing]
    api.get("/v2/pods").respond(200, json={"pods": [pod]})
    with caplog.at_level(logging.WARNING), pytest.raises(Transient):
        await provider.list(NODE)
    assert "runpod-test" in caplog.text and missing in caplog.text


@pytest.mark.parametrize(
    "response",
    [httpx.Response(200, text="<html>gateway</html>"), httpx.Response(200, json={"items": []})],
)
async def test_malformed_list_bodies_are_transient(
    provider: RunPodProvider, api: respx.MockRouter, response: httpx.Response
) -> None:
    api.get("/v2/pods").mock(return_value=response)
    with pytest.raises(Transient):
        await provider.list(NODE)


# --- error mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "detail", "expected"),
    [
        (400, "no instances available for this GPU type in US-KS-2", NoCapacity),
        (400, "There are no longer any instances available with the requested specifications", NoCapacity),
        (400, "allowedCudaVersions and minCudaVersion are mutually exclusive", InvalidRequest),
        (401, "missing bearer token", QuotaOrBilling),
        (402, "insufficient balance", QuotaOrBilling),
        (403, "access denied", NoCapacity),  # create: this pool is not accessible, try the next
        (404, "template not found", InvalidRequest),
        (422, "Request validation failed.", InvalidRequest),
        (429, "rate limit exceeded for the minute window", Transient),
        (500, "internal", Transient),
        (503, "upstream unavailable", Transient),
    ],
)
async def test_create_errors_map_to_error_classes(
    provider: RunPodProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    status: int,
    detail: str,
    expected: type[ProviderError],
) -> None:
    api.get("/v2/pods").respond(200, json={"pods": []})
    api.post("/v2/pods").mock(return_value=problem(spec, status, detail))
    with pytest.raises(ProviderError) as caught:
        await provider.deploy(request_for())
    assert type(caught.value) is expected
    assert caught.value.provider == "runpod-test"
    assert detail in str(caught.value)


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, QuotaOrBilling), (403, QuotaOrBilling), (404, NotFound), (429, Transient), (502, Transient)],
)
async def test_read_errors_map_to_error_classes(
    provider: RunPodProvider,
    api: respx.MockRouter,
    spec: OpenApiDoc,
    status: int,
    expected: type[ProviderError],
) -> None:
    api.get("/v2/pods").mock(return_value=problem(spec, status, "nope"))
    with pytest.raises(ProviderError) as caught:
        await provider.list(NODE)
    assert type(caught.value) is expected


async def test_429_honours_retry_after(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    headers = spec.doc["components"]["responses"]["TooManyRequestsError"]["headers"]
    assert headers["Retry-After"]["schema"]["type"] == "integer"
    api.get("/v2/pods").mock(return_value=problem(spec, 429, "rate limit exceeded", **{"Retry-After": "12"}))
    with pytest.raises(Transient) as caught:
        await provider.list(NODE)
    assert caught.value.retry_after == 12


# --- secrets ------------------------------------------------------------------------------------


async def test_the_api_key_never_reaches_logs_reprs_or_errors(
    api: respx.MockRouter, spec: OpenApiDoc, caplog: pytest.LogCaptureFixture
) -> None:
    settings = RunPodProvider.Settings(api_key=KEY)
    adapter = RunPodProvider("runpod-test", settings)
    api.get("/v2/pods").mock(return_value=problem(spec, 401, f"invalid key {KEY}"))
    api.get("/v2/catalog/gpus").mock(side_effect=httpx.ConnectError(f"boom {KEY}"))
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for call in (adapter.list(NODE), adapter.offers(), adapter.delete("u")):
            try:
                await call
            except ProviderError as exc:
                errors.append(f"{exc} {exc!r} {exc.args}")
    await adapter.close()
    assert len(errors) == 3
    assert api.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"
    for text in (caplog.text, *errors, repr(adapter), repr(settings), str(settings.model_dump())):
        assert KEY not in text


# --- logs ---------------------------------------------------------------------------------------


async def test_logs_parse_the_published_sse_stream(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    assert isinstance(provider, SupportsLogs)
    example = spec.operation("get", "/v2/pods/{id}/logs")["responses"]["200"]["content"]["text/event-stream"]
    event = example["examples"]["logLine"]["value"]
    second = event.replace("Model loaded.", "Serving on :8000").replace("000000000001", "000000000002")
    pod = pod_json(spec, uid="u", pod_id="p")
    api.get("/v2/pods").mock(return_value=pods_response(spec, [pod]))
    api.get("/v2/pods/p").respond(200, json=pod)
    route = api.get("/v2/pods/p/logs").respond(
        200, text=event + "\n" + second + "\n", headers={"Content-Type": "text/event-stream"}
    )

    chunks = [c async for c in provider.logs("u", LogOptions(tail_lines=50))]
    assert b"".join(chunks) == b"Model loaded.\nServing on :8000\n"
    assert route.calls.last.request.url.params["tail"] == "50"
    assert route.calls.last.request.url.params["source"] == "container"

    stamped = [c async for c in provider.logs("u", LogOptions(timestamps=True, limit_bytes=10))]
    assert b"".join(stamped) == b"2026-06-01"


async def test_logs_of_unknown_uid_is_not_found(provider: RunPodProvider, api: respx.MockRouter) -> None:
    api.get("/v2/pods").respond(200, json={"pods": []})
    with pytest.raises(NotFound):
        async for _ in provider.logs("nope", LogOptions()):
            pass


async def test_unsupported_input_is_refused_before_any_catalog_read(
    provider: RunPodProvider, api: respx.MockRouter
) -> None:
    api.get("/v2/pods").respond(200, json={"pods": []})
    catalog = api.get("/v2/catalog/gpus")
    two = [Container(name="a", image="x"), Container(name="b", image="y")]
    with pytest.raises(InvalidRequest, match=r"spec\.containers"):
        await provider.deploy(request_for(offer_id=None, containers=two))
    assert not catalog.called


# --- endpoints ----------------------------------------------------------------------------------


async def test_endpoints_are_the_public_ip_and_port_mappings_of_the_runtime(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    pod = pod_json(spec, uid="uid-1", pod_id="pod-1")
    pod["runtime"]["ports"] = [
        {"private": 8000, "public": 43210, "type": "tcp", "ip": "45.23.12.1"},
        {"private": 22, "public": 34446, "type": "tcp", "ip": "45.23.12.1"},
        {"private": 8888, "public": None, "type": "http", "ip": None},  # behind RunPod's proxy only
    ]
    spec.validate_schema("Pod", pod)
    api.get("/v2/pods").mock(return_value=pods_response(spec, [foreign_pod(spec), pod]))

    found = await provider.endpoints("uid-1")

    assert (await provider.info()).capabilities.endpoints
    assert found.uid == "uid-1" and found.addresses == ["45.23.12.1"]
    assert found.port_for(8000) == 43210 and found.port_for(22) == 34446
    assert found.port_for(8888) is None  # no address route: left out, not guessed


async def test_endpoints_of_a_pod_not_running_are_empty_and_of_an_unknown_uid_not_found(
    provider: RunPodProvider, api: respx.MockRouter, spec: OpenApiDoc
) -> None:
    starting = pod_json(spec, uid="uid-1", pod_id="pod-1", status="STARTING")
    starting["runtime"] = None
    spec.validate_schema("Pod", starting)
    api.get("/v2/pods").mock(return_value=pods_response(spec, [starting]))

    found = await provider.endpoints("uid-1")

    assert found.addresses == [] and found.ports == []
    with pytest.raises(NotFound):
        await provider.endpoints("uid-unknown")
