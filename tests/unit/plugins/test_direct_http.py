"""DirectSender: a plain call straight to the transport, with the API key's semantics kept
(the current key's header; on 401/403 a rotated key is read and the call sent once more)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
import respx
from pydantic import SecretStr

from vkprovider.plugins.api import ApiKeySource, DirectSender, QuotaOrBilling

OLD, NEW = "key_OLD_0123456789", "key_NEW_9876543210"
BASE = "https://cloud.example/v1"


class Recorder:
    """A cloud behind ``httpx.MockTransport`` that accepts ``accepted`` keys and records requests."""

    def __init__(self, *accepted: str) -> None:
        self.accepted = set(accepted)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        given = request.headers.get("Authorization", "")
        if self.accepted and given.removeprefix("Bearer ") not in self.accepted:
            return httpx.Response(401, json={"error": "invalid api key"})
        return httpx.Response(200, json={"method": request.method, "url": str(request.url)})

    def keys(self) -> list[str]:
        return [r.headers.get("Authorization", "").removeprefix("Bearer ") for r in self.requests]


def key_file(tmp_path: Path, value: str) -> ApiKeySource:
    path = tmp_path / "key"
    path.write_text(value + "\n")
    return ApiKeySource("cloud", api_key=None, api_key_env=None, api_key_file=path)


def rotate(source: ApiKeySource, tmp_path: Path, value: str) -> None:
    """Swap the file as the kubelet updates a mounted Secret (a new inode)."""
    fresh = tmp_path / "key.new"
    fresh.write_text(value + "\n")
    fresh.replace(tmp_path / "key")


async def test_a_call_carries_path_query_json_and_reads_the_answer() -> None:
    cloud = Recorder()
    sender = DirectSender(httpx.MockTransport(cloud), base_url=BASE + "/", timeout=3.0)
    response = await sender.request(
        "POST", "/deployments", params={"force": True, "n": 2}, json={"name": "ü"}
    )
    (sent,) = cloud.requests
    assert str(sent.url) == BASE + "/deployments?force=true&n=2"  # as httpx encodes params=
    assert sent.headers["Content-Type"] == "application/json"
    assert json.loads(sent.content) == {"name": "ü"}
    assert "Authorization" not in sent.headers  # no key source: no header
    assert sent.extensions["timeout"] == httpx.Timeout(3.0).as_dict()
    assert response.status_code == 200 and response.json()["method"] == "POST"
    assert response.request.url.path == "/v1/deployments"  # error mappers read it


async def test_the_header_is_the_key_current_at_send_time(tmp_path: Path) -> None:
    source = key_file(tmp_path, OLD)
    cloud = Recorder(OLD, NEW)
    sender = DirectSender(httpx.MockTransport(cloud), base_url=BASE, timeout=3.0, key=source)
    await sender.request("GET", "/deployments/a")
    rotate(source, tmp_path, NEW)
    await sender.request("GET", "/deployments/a")
    assert cloud.keys() == [OLD, NEW]


async def test_a_refusal_after_a_rotation_is_sent_once_more_with_the_new_key(tmp_path: Path) -> None:
    source = key_file(tmp_path, OLD)
    sender_cloud = Recorder(OLD)
    sender = DirectSender(httpx.MockTransport(sender_cloud), base_url=BASE, timeout=3.0, key=source)
    await sender.request("GET", "/deployments/a")  # the old key is read and cached
    # Rotated and the old key revoked at once, the file's identity unchanged (nothing tells the
    # source before the call): the refusal makes it read the key again.
    sender_cloud.accepted = {NEW}
    path = tmp_path / "key"
    before = path.stat()
    path.write_text(NEW + "\n")  # same inode and size (the keys are as long)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same mtime
    response = await sender.request("POST", "/deployments", json={"a": 1})
    assert response.status_code == 200
    assert sender_cloud.keys() == [OLD, OLD, NEW]
    assert json.loads(sender_cloud.requests[-1].content) == {"a": 1}  # the body was sent again


async def test_a_refusal_with_an_unchanged_key_is_the_answer_not_retried(tmp_path: Path) -> None:
    source = key_file(tmp_path, OLD)
    cloud = Recorder(NEW)  # the old key is revoked, no new one mounted yet
    sender = DirectSender(httpx.MockTransport(cloud), base_url=BASE, timeout=3.0, key=source)
    response = await sender.request("GET", "/deployments/a")
    assert response.status_code == 401 and cloud.keys() == [OLD]


async def test_a_missing_key_is_quota_or_billing_before_any_request(tmp_path: Path) -> None:
    source = ApiKeySource("cloud", api_key=None, api_key_env=None, api_key_file=tmp_path / "absent")
    cloud = Recorder()
    sender = DirectSender(httpx.MockTransport(cloud), base_url=BASE, timeout=3.0, key=source)
    with pytest.raises(QuotaOrBilling, match="unreadable"):
        await sender.request("GET", "/deployments/a")
    assert cloud.requests == []


async def test_an_inline_key_is_sent_and_transport_errors_keep_their_request() -> None:
    source = ApiKeySource("cloud", api_key=SecretStr(OLD), api_key_env=None, api_key_file=None)

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    sender = DirectSender(httpx.MockTransport(refuse), base_url=BASE, timeout=3.0, key=source)
    with pytest.raises(httpx.ConnectError) as caught:
        await sender.request("DELETE", "/deployments/a")
    assert caught.value.request.url.path == "/v1/deployments/a"
    assert caught.value.request.headers["Authorization"] == f"Bearer {OLD}"


async def test_respx_mocks_reach_it_through_httpxs_own_transport() -> None:
    with respx.mock(assert_all_called=True) as router:
        router.get(BASE + "/deployments/a").mock(return_value=httpx.Response(404, json={"detail": "no"}))
        sender = DirectSender(httpx.AsyncHTTPTransport(), base_url=BASE, timeout=3.0)
        response = await sender.request("GET", "/deployments/a")
    assert response.status_code == 404 and response.json() == {"detail": "no"}
