"""The proxy environment is read once, when the client is built, never per request."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from tests.unit.kube.fake_apiserver import FakeApiserver
from vkprovider.kube.client import KubeClient
from vkprovider.kube.transport import env_proxy


async def test_requests_do_not_consult_the_environment() -> None:
    kube = KubeClient(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))
    try:
        assert kube._api.rest_client.pool_manager.trust_env is False
    finally:
        await kube.close()


async def test_a_proxy_named_at_start_is_used_and_later_changes_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = FakeApiserver(lambda target: ({"kind": "PodList", "items": []}, [], False))
    async with proxy.serving():
        for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", proxy.url)
        # The apiserver's name is never resolved: the request goes to the proxy on 127.0.0.1.
        kube = KubeClient(client.ApiClient(client.Configuration(host="http://apiserver.invalid")))
        try:
            monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # read once: ignored now
            assert await kube.request("GET", "/api/v1/pods") == {"kind": "PodList", "items": []}
            assert proxy.requests == ["http://apiserver.invalid/api/v1/pods"]
        finally:
            await kube.close()


def test_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:3128")
    monkeypatch.setenv("no_proxy", "apiserver.local")
    assert env_proxy("https://apiserver.local:6443") is None
    assert env_proxy("https://other.example:6443") == "http://127.0.0.1:3128"
