"""The adapter kit's plumbing, once for every adapter on it: identity map, per-UID serialisation,
find-before-create, tolerant delete, unknown UIDs, bounded logs, the client's error reading.

A tiny cloud held in a dict stands in for a cloud API; its objects carry our labels as a real
cloud's would, so the identity map can be thrown away (a restart) and rebuilt from them.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    LABEL_POD_UID,
    CloudAdapter,
    Container,
    ContainerState,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    KeyedHttpClient,
    LogOptions,
    NoCapacity,
    NotFound,
    Offer,
    Phase,
    PortMapping,
    Provider,
    ProviderError,
    QuotaOrBilling,
    SupportsEndpoints,
    SupportsLogs,
    Transient,
    cheapest_offer,
    one_container_status,
)

NODE = "vk-node"


class Cloud:
    """Objects by id, each with labels; counts the calls the kit makes."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.ids = itertools.count(1)
        self.calls: list[str] = []
        self.create_gate: asyncio.Event | None = None
        self.create_started = asyncio.Event()

    async def create(self, labels: dict[str, str]) -> dict[str, Any]:
        self.calls.append("create")
        self.create_started.set()
        if self.create_gate is not None:
            await self.create_gate.wait()
        obj = {"id": f"c-{next(self.ids)}", "labels": labels, "state": "running"}
        self.objects[obj["id"]] = obj
        return obj


class TinyAdapter(CloudAdapter[dict[str, Any]]):
    kind = "tiny box"
    adapter = "tiny"

    def __init__(self, name: str, cloud: Cloud) -> None:
        super().__init__(name)
        self.cloud = cloud
        self.log_source_closed = False

    def identity(self, raw: Any) -> tuple[str, str] | None:
        labels = raw.get("labels") or {}
        if LABEL_POD_UID not in labels:
            return None
        return labels[LABEL_POD_UID], labels.get(LABEL_NODE_NAME, "")

    def parse(self, raw: Any) -> dict[str, Any]:
        return dict(raw)

    def cloud_id(self, view: dict[str, Any]) -> str:
        return str(view["id"])

    def status(self, view: dict[str, Any]) -> DeploymentStatus:
        uid, node = self.identity(view) or ("", "")
        return one_container_status(uid=uid, node_name=node, provider_id=view["id"], phase=Phase.RUNNING)

    async def fetch(self, cloud_id: str) -> Any:
        self.cloud.calls.append(f"fetch {cloud_id}")
        if cloud_id not in self.cloud.objects:
            raise NotFound(f"no {cloud_id}", provider=self.name)
        return self.cloud.objects[cloud_id]

    async def fetch_all(self, node_name: str | None) -> Sequence[Any]:
        self.cloud.calls.append("fetch_all")
        return builtins.list(self.cloud.objects.values())

    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        return self.status(await self.cloud.create(request.tags()))

    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> None:
        self.cloud.calls.append(f"remove {cloud_id}")
        if self.cloud.objects.pop(cloud_id, None) is None:
            raise NotFound(f"no {cloud_id}", provider=self.name)

    async def endpoints_of(self, uid: str, view: dict[str, Any]) -> DeploymentEndpoints:
        return DeploymentEndpoints(
            uid=uid, addresses=["203.0.113.7"], ports=[PortMapping(container_port=80, port=40080)]
        )

    async def log_chunks(self, uid: str, view: dict[str, Any], options: LogOptions) -> AsyncIterator[bytes]:
        try:
            for _ in range(1000):
                yield b"0123456789"
        finally:
            self.log_source_closed = True

    async def probe(self) -> None: ...

    async def offers(self) -> builtins.list[Offer]:
        return []

    async def close(self) -> None: ...


def request_for(uid: str, node: str = NODE) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="default",
        name=f"pod-{uid}",
        node_name=node,
        containers=[Container(name="main", image="busybox")],
    )


@pytest.fixture
def cloud() -> Cloud:
    return Cloud()


@pytest.fixture
def adapter(cloud: Cloud) -> TinyAdapter:
    return TinyAdapter("tiny", cloud)


async def test_concurrent_deploys_of_one_uid_make_one_deployment(adapter: TinyAdapter, cloud: Cloud) -> None:
    statuses = await asyncio.gather(*(adapter.deploy(request_for("u1")) for _ in range(8)))
    assert cloud.calls.count("create") == 1
    assert {s.provider_id for s in statuses} == {"c-1"}


async def test_deploy_finds_before_it_creates_also_after_a_restart(
    adapter: TinyAdapter, cloud: Cloud
) -> None:
    first = await adapter.deploy(request_for("u1"))
    restarted = TinyAdapter("tiny", cloud)  # an empty identity map
    again = await restarted.deploy(request_for("u1"))
    assert again.provider_id == first.provider_id and cloud.calls.count("create") == 1


async def test_the_identity_map_is_rebuilt_from_the_labels_and_then_read_by_id(cloud: Cloud) -> None:
    await TinyAdapter("tiny", cloud).deploy(request_for("u1"))
    restarted = TinyAdapter("tiny", cloud)
    cloud.calls.clear()
    assert (await restarted.get("u1")).provider_id == "c-1"
    assert cloud.calls == ["fetch_all"]  # searched by label once...
    cloud.calls.clear()
    await restarted.get("u1")
    assert cloud.calls == ["fetch c-1"]  # ...then read by the remembered id


async def test_list_remembers_what_it_saw(cloud: Cloud) -> None:
    await TinyAdapter("tiny", cloud).deploy(request_for("u1"))
    restarted = TinyAdapter("tiny", cloud)
    await restarted.list(NODE)
    cloud.calls.clear()
    await restarted.get("u1")
    assert cloud.calls == ["fetch c-1"]


async def test_a_cached_id_that_now_holds_another_uid_is_dropped(adapter: TinyAdapter, cloud: Cloud) -> None:
    await adapter.deploy(request_for("u1"))
    cloud.objects["c-1"]["labels"] = request_for("u2").tags()  # the id now names another pod
    with pytest.raises(NotFound, match="no tiny box for uid u1") as caught:
        await adapter.get("u1")
    assert caught.value.provider == "tiny"


async def test_list_is_scoped_to_the_node_and_skips_foreign_objects(
    adapter: TinyAdapter, cloud: Cloud
) -> None:
    await adapter.deploy(request_for("u1"))
    await adapter.deploy(request_for("u2", node="other-node"))
    cloud.objects["x"] = {"id": "x", "labels": {"team": "someone else's"}}
    assert [s.uid for s in await adapter.list(NODE)] == ["u1"]


async def test_delete_of_an_unknown_uid_and_a_repeat_succeed(adapter: TinyAdapter, cloud: Cloud) -> None:
    await adapter.delete("never-deployed")
    await adapter.deploy(request_for("u1"))
    await adapter.delete("u1")
    await adapter.delete("u1")
    assert cloud.objects == {} and cloud.calls.count("remove c-1") == 1
    with pytest.raises(NotFound):
        await adapter.get("u1")


async def test_delete_of_an_object_gone_between_look_up_and_call_succeeds(
    adapter: TinyAdapter, cloud: Cloud
) -> None:
    await adapter.deploy(request_for("u1"))
    original = adapter.fetch

    async def vanishing(cloud_id: str) -> Any:
        raw = await original(cloud_id)
        cloud.objects.pop(cloud_id)  # someone else deletes it right after our read
        return raw

    adapter.fetch = vanishing  # type: ignore[method-assign]
    await adapter.delete("u1")


async def test_a_delete_waits_for_the_create_in_flight_and_deletes_what_it_made(
    adapter: TinyAdapter, cloud: Cloud
) -> None:
    cloud.create_gate = asyncio.Event()
    deploying = asyncio.create_task(adapter.deploy(request_for("u1")))
    await cloud.create_started.wait()
    deleting = asyncio.create_task(adapter.delete("u1"))
    await asyncio.sleep(0)
    assert not deleting.done()  # serialised behind the deploy of the same UID
    assert (await adapter.list(NODE)) == []  # other calls are not held
    cloud.create_gate.set()
    await deploying
    await deleting
    assert cloud.objects == {}  # no orphan: the delete found the object the create made


async def test_unknown_uids_are_not_found_for_get_endpoints_and_logs(adapter: TinyAdapter) -> None:
    for call in (adapter.get("nope"), adapter.endpoints("nope")):
        with pytest.raises(NotFound):
            await call
    with pytest.raises(NotFound):
        await anext(adapter.logs("nope", LogOptions()))


async def test_endpoints_come_from_the_adapters_mapping(adapter: TinyAdapter) -> None:
    await adapter.deploy(request_for("u1"))
    endpoints = await adapter.endpoints("u1")
    assert endpoints.addresses == ["203.0.113.7"] and endpoints.ports[0].port == 40080


async def test_logs_stop_at_limit_bytes_and_close_the_source(adapter: TinyAdapter) -> None:
    await adapter.deploy(request_for("u1"))
    got = b"".join([chunk async for chunk in adapter.logs("u1", LogOptions(limit_bytes=25))])
    assert got == b"0123456789012345678901234"
    assert adapter.log_source_closed


# --- the client's error reading -------------------------------------------------------------------


class _Settings:
    api_key: SecretStr | None = SecretStr("sk-kit-4711")
    api_key_env: str | None = None
    api_key_file: Path | None = None
    api_key_secret: str | None = None
    base_url = "https://cloud.test"
    timeout_seconds = 5.0
    max_connections = 4
    log_max_connections = 2


class _Client(KeyedHttpClient[str]):
    def error_class(self, op: str, status: int, detail: str) -> type[ProviderError] | None:
        return NoCapacity if op == "create" and "sold out" in detail else None


def _client(handler: Any, settings: _Settings | None = None) -> _Client:
    return _Client.from_settings("cloud", settings or _Settings(), transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "body", "expected", "message"),
    [
        (400, {"detail": "sold out here"}, NoCapacity, "create: HTTP 400: sold out here"),
        (400, {"message": "bad image"}, InvalidRequest, "create: HTTP 400: bad image"),
        (401, {"error": "who are you"}, QuotaOrBilling, "create: HTTP 401: who are you"),
        (404, {}, NotFound, "create: HTTP 404: Not Found"),
        (503, "down", Transient, "create: HTTP 503: down"),
    ],
)
async def test_the_client_reads_failures_through_the_one_table_and_the_clouds_wording(
    status: int, body: Any, expected: type[ProviderError], message: str
) -> None:
    kwargs = {"json": body} if isinstance(body, dict) else {"text": body}
    client = _client(lambda request: httpx.Response(status, **kwargs))
    with pytest.raises(ProviderError) as caught:
        await client.send_json("create", "POST", "/things")
    assert type(caught.value) is expected and caught.value.message == message
    await client.close()


async def test_the_client_sends_the_key_from_settings_and_reads_json_fields() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer sk-kit-4711"
        assert str(request.url) == "https://cloud.test/things"
        return httpx.Response(200, json={"things": [1, 2], "one": 3})

    client = _client(handler)
    body = await client.send_json("read", "GET", "/things")
    assert client.list_field("read", body, "things") == [1, 2]
    with pytest.raises(Transient, match="'one' is not a list"):
        client.list_field("read", body, "one")
    with pytest.raises(Transient, match="lacks 'two'"):
        await client.send_json("read", "GET", "/things", key="two")
    await client.close()


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
async def test_transport_failures_are_transient_naming_the_operation(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    client = _client(handler)
    with pytest.raises(Transient, match=f"read: {type(exc).__name__}"):
        await client.send_json("read", "GET", "/things")
    await client.close()


async def test_the_key_comes_from_the_env_or_file_the_settings_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        return httpx.Response(200, json={})

    monkeypatch.setenv("KIT_KEY_FOR_TEST", "from-env")
    (tmp_path / "key").write_text("from-file\n")
    from_env, from_file, missing = _Settings(), _Settings(), _Settings()
    from_env.api_key, from_env.api_key_env = None, "KIT_KEY_FOR_TEST"
    from_file.api_key, from_file.api_key_file = None, tmp_path / "key"
    missing.api_key, missing.api_key_env = None, "KIT_KEY_SURELY_UNSET"
    for settings in (from_env, from_file):
        client = _client(handler, settings)
        await client.send_json("read", "GET", "/things")
        await client.close()
    assert seen == ["Bearer from-env", "Bearer from-file"]
    client = _client(handler, missing)
    with pytest.raises(QuotaOrBilling, match="KIT_KEY_SURELY_UNSET"):
        await client.send_json("read", "GET", "/things")
    await client.close()


# --- offer choice and one-container status --------------------------------------------------------


def _offer(
    offer_id: str, price: float, *, gpu: str = "H100-SXM-80GB", count: int = 1, capacity: int = 1
) -> Offer:
    return Offer(
        provider="p",
        offer_id=offer_id,
        gpu_type=gpu,
        gpu_count=count,
        price_per_hour=price,
        capacity=capacity,
        region="eu",
    )


def test_the_cheapest_offer_that_fits_and_has_capacity() -> None:
    request = request_for("u1").model_copy(update={"gpu_count": 1, "gpu_type": "h100 sxm 80gb"})
    offers = [
        _offer("cheap-but-full", 1.0, capacity=0),
        _offer("wrong-count", 1.5, count=2),
        _offer("other-gpu", 1.6, gpu="A100-SXM-80GB"),
        _offer("b", 2.0),
        _offer("a", 2.0),
        _offer("dear", 3.0),
    ]
    best = cheapest_offer(offers, request)
    assert best is not None and best.offer_id == "a"
    assert cheapest_offer(offers, request.model_copy(update={"region": "us"})) is None


def test_one_container_status_keeps_deployment_and_container_in_step() -> None:
    running = one_container_status(uid="u", node_name=NODE, provider_id="c", phase=Phase.RUNNING, image="img")
    assert running.ready and running.containers[0].state is ContainerState.RUNNING
    assert running.containers[0].image == "img"
    failed = one_container_status(uid="u", node_name=NODE, provider_id="c", phase=Phase.FAILED, reason="Oops")
    assert not failed.ready and failed.containers[0].state is ContainerState.TERMINATED
    assert failed.containers[0].reason == "Oops"
    pending = one_container_status(uid="u", node_name=NODE, provider_id="c", phase=Phase.PENDING)
    assert pending.containers[0].state is ContainerState.WAITING


class _Bare(CloudAdapter[dict[str, Any]]):
    """Only the required hooks: a cloud without logs or endpoints."""

    identity = TinyAdapter.identity
    parse = TinyAdapter.parse
    cloud_id = TinyAdapter.cloud_id
    status = TinyAdapter.status
    fetch = TinyAdapter.fetch
    fetch_all = TinyAdapter.fetch_all
    create = TinyAdapter.create
    remove = TinyAdapter.remove
    probe = TinyAdapter.probe
    offers = TinyAdapter.offers
    close = TinyAdapter.close


async def test_logs_and_endpoints_are_offered_and_declared_only_by_adapters_that_write_their_hooks(
    cloud: Cloud,
) -> None:
    tiny = TinyAdapter("tiny-1", cloud)
    assert isinstance(tiny, SupportsLogs) and isinstance(tiny, SupportsEndpoints)
    info = await tiny.info()
    assert (info.name, info.adapter, info.version) == ("tiny-1", "tiny", "0.1.0")
    assert info.capabilities.logs and info.capabilities.endpoints
    bare = _Bare("bare")
    assert isinstance(bare, Provider)
    assert not isinstance(bare, SupportsLogs) and not isinstance(bare, SupportsEndpoints)
    capabilities = (await bare.info()).capabilities
    assert not capabilities.logs and not capabilities.endpoints


class IdempotentAdapter(TinyAdapter):
    """A cloud whose id is the pod UID and whose create of an existing UID returns it."""

    create_is_idempotent = True

    def known_id(self, uid: str) -> str | None:
        return f"id-{uid}"

    async def create(self, request: DeploymentRequest) -> DeploymentStatus:
        self.cloud.calls.append("create")
        cloud_id = f"id-{request.uid}"
        obj = self.cloud.objects.setdefault(cloud_id, {"id": cloud_id, "labels": request.tags()})
        return self.status(obj)

    async def remove(self, cloud_id: str, grace_period_seconds: float | None) -> bool | None:
        await super().remove(cloud_id, grace_period_seconds)
        return True


async def test_an_idempotent_create_with_a_known_id_costs_one_request_up_and_one_down(cloud: Cloud) -> None:
    adapter = IdempotentAdapter("tiny", cloud)
    first = await adapter.deploy(request_for("u1"))
    again = await adapter.deploy(request_for("u1"))
    assert first.provider_id == again.provider_id == "id-u1" and len(cloud.objects) == 1
    assert await adapter.delete("u1") is True  # remove's "gone" passed on
    assert await adapter.delete("u1") is None  # unknown now: NotFound tolerated, nothing claimed
    assert cloud.calls == ["create", "create", "remove id-u1", "remove id-u1"]  # no look-ups


async def test_without_the_switch_a_known_id_is_still_looked_up_first(
    adapter: TinyAdapter, cloud: Cloud
) -> None:
    await adapter.deploy(request_for("u1"))
    assert await adapter.delete("u1") is None  # TinyAdapter's remove answers nothing
    assert cloud.calls == ["fetch_all", "create", "fetch c-1", "remove c-1"]
