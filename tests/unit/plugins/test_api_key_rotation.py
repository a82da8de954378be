"""Key rotation without a restart (issue 29): the adapters' one key path, ``ApiKeySource`` and
``BearerAuth``, re-reads a rotated key file, and on a 401/403 reads the key again and retries
once with the new key before the answer is mapped to ``QuotaOrBilling``.

Driven through the real RunPod and Vast.ai adapters, with respx at the clouds' HTTP edge only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from vkprovider_runpod.adapter import RunPodProvider
from vkprovider_vastai.adapter import VastAiProvider

from vkprovider.plugins.api import QuotaOrBilling

OLD, NEW = "key_OLD_0123456789", "key_NEW_9876543210"


def _runpod(**key: Any) -> Any:
    return RunPodProvider("rp", RunPodProvider.Settings(**key))


def _vastai(**key: Any) -> Any:
    return VastAiProvider("vast", VastAiProvider.Settings(**key))


#: (adapter factory, base URL, the path its probe reads, an empty answer of that path)
ADAPTERS = [
    pytest.param(_runpod, "https://api.runpod.io", "/v2/pods", {"pods": []}, id="runpod"),
    pytest.param(
        _vastai,
        "https://console.vast.ai",
        "/api/v1/instances",
        {"instances_found": 0, "instances": [], "next_token": None},
        id="vastai",
    ),
]


@pytest.fixture
def cloud() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def _accepting(key: str, body: Any) -> Callable[[httpx.Request], httpx.Response]:
    """A cloud that accepts only ``key`` (the old one is revoked)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") == f"Bearer {key}":
            return httpx.Response(200, json=body)
        return httpx.Response(401, json={"error": "invalid api key"})

    return answer


def _rotate(path: Path, key: str) -> None:
    """Rotate like the kubelet updates a mounted Secret: a new file swapped in atomically."""
    tmp = path.with_suffix(".new")
    tmp.write_text(key + "\n")
    os.replace(tmp, path)


@pytest.mark.parametrize(("make", "base", "path", "body"), ADAPTERS)
async def test_a_rotated_key_file_is_used_by_the_next_call(
    make: Any, base: str, path: str, body: Any, cloud: respx.MockRouter, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(OLD + "\n")
    route = cloud.get(f"{base}{path}").mock(side_effect=_accepting(OLD, body))
    adapter = make(api_key_file=key_file)
    try:
        await adapter.probe()
        assert route.calls.last.request.headers["Authorization"] == f"Bearer {OLD}"
        _rotate(key_file, NEW)
        route.mock(side_effect=_accepting(NEW, body))
        await adapter.probe()
    finally:
        await adapter.close()
    # The new key went out first time: no refused call with the old one after the rotation.
    assert [c.request.headers["Authorization"] for c in route.calls] == [f"Bearer {OLD}", f"Bearer {NEW}"]


@pytest.mark.parametrize(("make", "base", "path", "body"), ADAPTERS)
async def test_401_with_the_old_key_then_the_new_one_succeeds(
    make: Any, base: str, path: str, body: Any, cloud: respx.MockRouter, tmp_path: Path
) -> None:
    """The file changed in a way ``stat`` cannot see (same size, mtime and inode: a rewrite within
    the filesystem's timestamp granularity): the 401 makes the source read again."""
    key_file = tmp_path / "key"
    key_file.write_text(OLD)
    stat = key_file.stat()
    route = cloud.get(f"{base}{path}").mock(side_effect=_accepting(OLD, body))
    adapter = make(api_key_file=key_file)
    try:
        await adapter.probe()
        key_file.write_text(NEW)  # same length as OLD
        os.utime(key_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        route.mock(side_effect=_accepting(NEW, body))
        await adapter.probe()  # not QuotaOrBilling
    finally:
        await adapter.close()
    sent = [c.request.headers["Authorization"] for c in route.calls]
    assert sent == [f"Bearer {OLD}", f"Bearer {OLD}", f"Bearer {NEW}"]


@pytest.mark.parametrize(("make", "base", "path", "body"), ADAPTERS)
async def test_a_changed_environment_variable_is_used(
    make: Any, base: str, path: str, body: Any, cloud: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VKP_ROTATION_TEST_KEY", OLD)
    route = cloud.get(f"{base}{path}").mock(side_effect=_accepting(OLD, body))
    adapter = make(api_key_env="VKP_ROTATION_TEST_KEY")
    try:
        await adapter.probe()
        monkeypatch.setenv("VKP_ROTATION_TEST_KEY", NEW)
        route.mock(side_effect=_accepting(NEW, body))
        await adapter.probe()
    finally:
        await adapter.close()
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {NEW}"


@pytest.mark.parametrize(("make", "base", "path", "body"), ADAPTERS)
async def test_a_refused_key_that_did_not_change_is_quota_or_billing_after_one_call(
    make: Any, base: str, path: str, body: Any, cloud: respx.MockRouter, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(OLD)
    route = cloud.get(f"{base}{path}").mock(side_effect=_accepting(NEW, body))
    adapter = make(api_key_file=key_file)
    try:
        with pytest.raises(QuotaOrBilling) as caught:
            await adapter.probe()
    finally:
        await adapter.close()
    assert route.call_count == 1  # the same key is not sent twice
    assert OLD not in str(caught.value)


async def test_an_error_quoting_the_old_key_is_scrubbed_after_a_rotation(
    cloud: respx.MockRouter, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(OLD)
    route = cloud.get("https://api.runpod.io/v2/pods").respond(200, json={"pods": []})
    adapter = _runpod(api_key_file=key_file)
    try:
        await adapter.probe()
        _rotate(key_file, NEW)
        route.respond(401, json={"error": f"key {OLD} was revoked; {NEW} is not valid either"})
        with pytest.raises(QuotaOrBilling) as caught:
            await adapter.probe()
    finally:
        await adapter.close()
    assert OLD not in str(caught.value) and NEW not in str(caught.value)


async def test_a_key_file_that_disappears_is_quota_or_billing_naming_the_file(
    cloud: respx.MockRouter, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(OLD)
    cloud.get("https://api.runpod.io/v2/pods").respond(200, json={"pods": []})
    adapter = _runpod(api_key_file=key_file, api_key_secret="vkprovider-system/keys (key K)")
    try:
        await adapter.probe()
        key_file.unlink()
        with pytest.raises(QuotaOrBilling, match=rf"{key_file}.*vkprovider-system/keys"):
            await adapter.probe()
        key_file.write_text(NEW)  # it comes back: so does the provider, without a restart
        await adapter.probe()
    finally:
        await adapter.close()
