"""The helpers the plugin API offers adapter authors: API keys, status → error, catalog GPUs, locks."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import time
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, model_validator

from vkprovider.plugins.api import (
    ApiKeySettings,
    ApiKeySource,
    BearerAuth,
    InvalidRequest,
    KeyedHttpClient,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
    UidLocks,
    error_body,
    error_for_status,
    json_body,
    normalize_catalog_gpu,
    parse_model,
    require_field,
    response_error,
    retry_after_seconds,
    transport_error,
)

KEY = "sk-live-do-not-leak-4711"
NOW = 1_750_000_000.0

# --- Retry-After ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("12", 12.0), ("2.5", 2.5), (" 7 ", 7.0), ("0", 0.0), ("-3", 0.0)],
)
def test_retry_after_in_seconds(value: str, expected: float) -> None:
    assert retry_after_seconds(value, now=NOW) == expected


def test_retry_after_as_an_http_date() -> None:
    future = email.utils.formatdate(NOW + 30, usegmt=True)  # "Wed, 21 Oct 2015 07:28:00 GMT"
    assert retry_after_seconds(future, now=NOW) == pytest.approx(30.0)
    past = email.utils.formatdate(NOW - 30, usegmt=True)
    assert retry_after_seconds(past, now=NOW) == 0.0
    zoneless = email.utils.formatdate(NOW + 60).replace("-0000", "").strip()  # read as GMT
    assert retry_after_seconds(zoneless, now=NOW) == pytest.approx(60.0)


def test_retry_after_defaults_to_the_clock() -> None:
    ahead = retry_after_seconds(email.utils.formatdate(time.time() + 120, usegmt=True))
    assert ahead is not None and 100 < ahead <= 121


@pytest.mark.parametrize("value", [None, "", "   ", "soon", "inf", "nan", "-inf", "Mon, 99 Foo 2025"])
def test_retry_after_that_says_nothing_usable_is_none(value: str | None) -> None:
    assert retry_after_seconds(value, now=NOW) is None


# --- status → error class -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, InvalidRequest),
        (401, QuotaOrBilling),
        (402, QuotaOrBilling),
        (403, QuotaOrBilling),
        (404, NotFound),
        (409, InvalidRequest),
        (410, InvalidRequest),
        (422, InvalidRequest),
        (429, Transient),
        (500, Transient),
        (502, Transient),
        (503, Transient),
        (599, Transient),
        (301, Transient),
        (100, Transient),
    ],
)
def test_each_status_class(status: int, expected: type[ProviderError]) -> None:
    error = error_for_status(status, f"create: HTTP {status}: nope", provider="p", retry_after=5.0)
    assert type(error) is expected
    assert error.provider == "p" and error.message == f"create: HTTP {status}: nope"
    assert str(error) == f"p: create: HTTP {status}: nope"
    if expected is Transient:
        assert isinstance(error, Transient) and error.retry_after == 5.0


def test_retry_after_is_carried_only_by_transient_and_may_be_absent() -> None:
    assert not hasattr(error_for_status(403, "m", provider="p", retry_after=5.0), "retry_after")
    error = error_for_status(503, "m", provider="p")
    assert isinstance(error, Transient) and error.retry_after is None


def test_the_adapters_own_reading_overrides_the_table() -> None:
    assert (
        type(error_for_status(400, "no instances available", provider="p", override=NoCapacity)) is NoCapacity
    )
    assert type(error_for_status(404, "m", provider="p", override=InvalidRequest)) is InvalidRequest
    transient = error_for_status(409, "m", provider="p", retry_after=2.0, override=Transient)
    assert isinstance(transient, Transient) and transient.retry_after == 2.0
    assert type(error_for_status(403, "m", provider="p", override=None)) is QuotaOrBilling


@pytest.mark.parametrize(
    "exc", [httpx.ConnectError(f"refused {KEY}"), httpx.ReadTimeout("slow"), TimeoutError()]
)
def test_transport_errors_are_transient_and_do_not_echo_the_exception_text(exc: Exception) -> None:
    error = transport_error("read", exc, provider="p")
    assert type(error) is Transient and error.retry_after is None
    assert error.message == f"read: {type(exc).__name__}"
    assert KEY not in str(error)


def test_error_body_gives_the_object_or_clipped_text() -> None:
    assert error_body(httpx.Response(400, json={"detail": "bad"})) == {"detail": "bad"}
    assert error_body(httpx.Response(400, json=["a", "b"])) == "['a', 'b']"
    assert error_body(httpx.Response(502, text="x" * 500)) == "x" * 200
    assert error_body(httpx.Response(503, content=b"")) == "Service Unavailable"
    assert error_body(httpx.Response(500, content=b"\xff\xfe{")) != ""


# --- malformed success responses ------------------------------------------------------------------


class _Thing(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    size: int


def test_success_bodies_that_do_not_decode_or_lack_fields_are_transient_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert json_body(httpx.Response(200, json={"a": 1}), "read", provider="p") == {"a": 1}
    with caplog.at_level(logging.WARNING):
        with pytest.raises(Transient, match="read: response is not JSON"):
            json_body(httpx.Response(200, text="<html>"), "read", provider="prov-a")
        assert require_field({"pods": []}, "pods", "read", provider="p") == []
        for body in ({}, [], None):
            with pytest.raises(Transient, match="lacks 'pods'"):
                require_field(body, "pods", "read", provider="prov-b")
        assert parse_model(_Thing, {"id": "x", "size": 3, "extra": 1}, "thing", provider="p") == _Thing(
            id="x", size=3
        )
        with pytest.raises(Transient, match=r"thing response missing or invalid fields: size") as caught:
            parse_model(_Thing, {"id": "x", "size": "big"}, "thing", provider="prov-c")
    assert not isinstance(caught.value.__cause__, ValidationError)
    assert "provider prov-a" in caplog.text and "provider prov-b" in caplog.text
    assert "provider prov-c" in caplog.text and "size" in caplog.text


# --- API keys -------------------------------------------------------------------------------------


class _Settings(ApiKeySettings):
    model_config = ConfigDict(extra="forbid")
    base_url: str = "https://api.example"


def test_settings_need_exactly_one_key_source(tmp_path: Path) -> None:
    for kwargs in ({}, {"api_key": "a", "api_key_env": "B"}, {"api_key_env": "B", "api_key_file": tmp_path}):
        with pytest.raises(ValueError, match="exactly one of api_key, api_key_env or api_key_file"):
            _Settings.model_validate(kwargs)
    assert _Settings(api_key_env="B").api_key_env == "B"
    with pytest.raises(ValidationError):
        _Settings.model_validate({"api_key": "a", "unknown": 1})


def test_a_subclass_validator_does_not_replace_the_key_check() -> None:
    class Stricter(ApiKeySettings):
        count: int = 1

        @model_validator(mode="after")
        def _positive(self) -> Stricter:
            if self.count < 1:
                raise ValueError("count must be positive")
            return self

    with pytest.raises(ValueError, match="exactly one"):
        Stricter()
    with pytest.raises(ValueError, match="count must be positive"):
        Stricter(api_key="k", count=0)


def test_the_key_resolves_from_inline_env_and_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KIT_TEST_KEY", "  from-env\n")
    (tmp_path / "key").write_text("from-file\n")
    for settings, expected in (
        (_Settings(api_key=KEY), KEY),
        (_Settings(api_key_env="KIT_TEST_KEY"), "from-env"),
        (_Settings(api_key_file=tmp_path / "key"), "from-file"),
    ):
        assert ApiKeySource.from_settings("p", settings).get() == expected


def test_the_key_is_resolved_lazily_and_follows_a_rotation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not read at construction (a missing key must not crash the start), and not cached for
    the process's life either (issue 29: a rotated key needed a restart)."""
    monkeypatch.delenv("KIT_TEST_LAZY", raising=False)
    source = ApiKeySource("p", api_key=None, api_key_env="KIT_TEST_LAZY", api_key_file=None)
    monkeypatch.setenv("KIT_TEST_LAZY", "first")
    assert source.get() == "first"
    monkeypatch.setenv("KIT_TEST_LAZY", "second")
    assert source.get() == "second"


def test_a_missing_key_is_quota_or_billing_naming_the_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KIT_TEST_UNSET", raising=False)
    (tmp_path / "empty").write_text("\n")
    cases = (
        (_Settings(api_key_env="KIT_TEST_UNSET"), "KIT_TEST_UNSET is unset"),
        (_Settings(api_key_file=tmp_path / "empty"), "is empty"),
        (_Settings(api_key_file=tmp_path / "absent"), "is unreadable"),
        (_Settings(api_key=""), "no API key configured"),
    )
    for settings, words in cases:
        with pytest.raises(QuotaOrBilling, match=words) as caught:
            ApiKeySource.from_settings("prov", settings).get()
        assert caught.value.provider == "prov" and caught.value.__cause__ is None


async def test_the_key_never_reaches_repr_str_logs_or_error_texts(caplog: pytest.LogCaptureFixture) -> None:
    settings = _Settings(api_key=KEY)
    source = ApiKeySource.from_settings("prov", settings)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, json={"detail": f"invalid key {KEY}"})

    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient(
            auth=BearerAuth(source), transport=httpx.MockTransport(handler), base_url="https://api.example"
        ) as client:
            response = await client.get("/v1/things")
            logging.getLogger("kit-test").info(
                "settings %s source %r client headers %s", settings, source, client.headers
            )
        error = source.scrubbed(error_for_status(401, f"read: {response.text}", provider="prov"))
    assert seen[0].headers["Authorization"] == f"Bearer {KEY}"
    assert error.message == 'read: {"detail":"invalid key ***"}' and error.args == (error.message,)
    texts = (
        repr(settings),
        str(settings),
        str(settings.model_dump()),
        settings.model_dump_json(),
        repr(source),
        str(source),
        str(error),
        repr(error),
        caplog.text,
    )
    for text in texts:
        assert KEY not in text


def test_scrub_leaves_text_alone_before_the_key_is_known() -> None:
    source = ApiKeySource("p", api_key=None, api_key_env="KIT_TEST_NEVER_READ", api_key_file=None)
    assert source.scrub("nothing to hide") == "nothing to hide"


# --- catalog GPU names ----------------------------------------------------------------------------


def test_catalog_memory_picks_the_variant_and_keeps_unknown_cards_apart() -> None:
    assert normalize_catalog_gpu("A100 SXM4", 40) == "A100-SXM-40GB"
    assert normalize_catalog_gpu("A100 SXM4", 80) == "A100-SXM-80GB"
    assert normalize_catalog_gpu("NVIDIA H100 80GB HBM3", 94) == "H100-SXM-80GB"  # named memory wins
    assert normalize_catalog_gpu("RTX 4090") == "RTX-4090-24GB"
    assert normalize_catalog_gpu("Mystery X", 0.5) == "MYSTERY-X"
    assert normalize_catalog_gpu("Mystery X", 12) != normalize_catalog_gpu("Mystery X", 24)


# --- per-UID locks --------------------------------------------------------------------------------


async def test_uid_locks_serialise_one_uid_and_not_others() -> None:
    locks = UidLocks()
    order: list[str] = []

    async def work(uid: str, tag: str) -> None:
        async with locks.lock(uid):
            order.append(f"{tag}+")
            await asyncio.sleep(0.01)
            order.append(f"{tag}-")

    await asyncio.gather(work("a", "a1"), work("a", "a2"), work("b", "b1"))
    assert order.index("a1-") < order.index("a2+")
    assert order.index("b1+") < order.index("a1-")


async def test_uid_locks_are_dropped_once_nobody_holds_or_waits() -> None:
    locks = UidLocks()
    entered = asyncio.Event()
    release = asyncio.Event()

    async def hold(uid: str) -> None:
        async with locks.lock(uid):
            entered.set()
            await release.wait()

    holder = asyncio.create_task(hold("a"))
    await entered.wait()
    waiter = asyncio.create_task(hold("a"))
    cancelled = asyncio.create_task(hold("a"))
    await asyncio.sleep(0)
    assert locks.locked("a") and len(locks) == 1
    cancelled.cancel()  # a waiter cancelled in the queue counts itself out
    await asyncio.gather(cancelled, return_exceptions=True)
    release.set()
    await asyncio.gather(holder, waiter)
    assert len(locks) == 0 and not locks.locked("a")
    with contextlib.suppress(RuntimeError):
        async with locks.lock("b"):
            raise RuntimeError("deploy failed")  # a failed deploy leaves nothing behind either
    assert len(locks) == 0
    locks.discard("never-seen")


class _KitClient(KeyedHttpClient[str]):
    """A minimal subclass: every failure is read by the shared table."""

    def map_error(
        self, op: str, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        if exc is not None:
            return transport_error(op, exc, provider=self._provider)
        assert response is not None
        return response_error(response, op, response.text, provider=self._provider)


async def test_keyed_client_maps_every_failure_once_and_never_leaks_the_key() -> None:
    key = "sk-kit-secret-123"
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.url.path == "/ok":
            return httpx.Response(200, json={"fine": True})
        if request.url.path == "/busy":
            return httpx.Response(429, headers={"Retry-After": "7"}, text=f"slow down {key}")
        raise httpx.ConnectError(f"refused while sending {key}")

    source = ApiKeySource("kit", api_key=SecretStr(key), api_key_env=None, api_key_file=None)
    client = _KitClient(
        "kit",
        base_url="https://api.example",
        key=source,
        timeout=5,
        max_connections=2,
        transport=httpx.MockTransport(handler),
    )
    try:
        assert (await client.send("read", "GET", "/ok")).json() == {"fine": True}
        with pytest.raises(Transient) as busy:
            await client.send("read", "GET", "/busy")
        assert busy.value.retry_after == 7.0 and "read: HTTP 429" in str(busy.value)
        assert key not in str(busy.value)  # the echoed key is scrubbed
        with pytest.raises(Transient) as down:
            await client.send("read", "GET", "/down")
        assert key not in str(down.value)
        assert seen[0] == f"Bearer {key}"  # the key travels only in the auth header
    finally:
        await client.close()
