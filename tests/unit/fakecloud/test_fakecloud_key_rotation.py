"""A fakecloud key rotated at the cloud (``PUT /admin/api-keys``, its console) and in the key
file the adapter reads (a mounted Secret): no restart, and revoking the old key costs no call
once the file has the new one (issue 29, docs/deploy.md "Rotating a provider key")."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fakecloud_helpers import config
from pydantic import ValidationError
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import running_fakecloud

from vkprovider.plugins.api import QuotaOrBilling


async def console(url: str, *keys: str) -> None:
    async with httpx.AsyncClient() as admin:
        answer = await admin.put(f"{url}/admin/api-keys", json={"keys": list(keys)})
        assert answer.json() == {"keys": len(keys)}


async def test_a_rotated_key_file_is_used_without_a_restart(tmp_path: Path) -> None:
    key = tmp_path / "FAKECLOUD_API_KEY"
    key.write_text("old\n")
    async with running_fakecloud(config(api_key="old")) as server:
        provider = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, api_key_file=key))
        try:
            await provider.probe()
            await console(server.url, "old", "new")  # 1. the new key, the old one still valid
            key.write_text("new\n")  # 2. the Secret, projected into the file
            await console(server.url, "new")  # 4. the old key revoked
            await provider.probe()
            assert await provider.offers()
        finally:
            await provider.close()


async def test_revoked_before_the_file_changed_fails_then_recovers_on_the_next_call(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("old")
    async with running_fakecloud(config(api_key="old")) as server:
        provider = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url, api_key_file=key))
        try:
            await provider.probe()
            await console(server.url, "new")
            with pytest.raises(QuotaOrBilling):
                await provider.probe()  # the file still has the revoked key: the cloud's answer
            key.write_text("new")
            await provider.probe()
        finally:
            await provider.close()


async def test_no_key_configured_sends_none_and_the_console_can_require_one() -> None:
    async with running_fakecloud(config()) as server:
        provider = FakeCloudProvider("p", FakeCloudProvider.Settings(url=server.url))
        try:
            await provider.probe()
            await console(server.url, "k")
            with pytest.raises(QuotaOrBilling):
                await provider.probe()
            await console(server.url)
            await provider.probe()
        finally:
            await provider.close()


def test_two_key_sources_are_refused_naming_them() -> None:
    with pytest.raises(ValidationError, match="at most one of api_key, api_key_env or api_key_file"):
        FakeCloudProvider.Settings(url="http://127.0.0.1:1", api_key="a", api_key_env="B")


async def test_the_console_refuses_a_malformed_body() -> None:
    async with running_fakecloud(config()) as server, httpx.AsyncClient() as admin:
        answer = await admin.put(f"{server.url}/admin/api-keys", json={"key": "x"})
        assert answer.status_code == 422 and "keys" in answer.text


async def test_healthz_needs_no_key_and_survives_an_outage() -> None:
    async with running_fakecloud(config(api_key="k")) as server, httpx.AsyncClient() as client:
        assert (await client.get(f"{server.url}/v1/health")).status_code == 401
        await client.post(f"{server.url}/admin/outage", json={"seconds": 60})
        assert (await client.get(f"{server.url}/healthz")).json() == {"status": "ok"}
