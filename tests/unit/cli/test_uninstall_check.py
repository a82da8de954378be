"""``vkprovider uninstall-check``: it cannot pass while a configured provider still runs a
deployment labelled for the node, nor when a provider or the service cannot be asked. Real
fakecloud servers on 127.0.0.1 behind the real adapter; the service's side is its admin app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.config import FakeCloudConfig
from vkprovider_fakecloud.server import FakeCloudServer, running_fakecloud

from tests.unit.cli.test_status_admin_auth import replicas  # noqa: F401 - fixture
from vkprovider.cli import admin_client, main
from vkprovider.plugins.api import Container, DeploymentRequest

NODE = "vk-external"


def cloud_config(name: str) -> FakeCloudConfig:
    return FakeCloudConfig.model_validate(
        {
            "provider": name,
            "seed": 1,
            "catalog": [
                {
                    "id": "a100",
                    "gpu_type": "A100-SXM4-80GB",
                    "region": "eu",
                    "price_per_hour": 1.5,
                    "capacity": 4,
                }
            ],
        }
    )


@pytest.fixture
async def clouds() -> AsyncIterator[dict[str, FakeCloudServer]]:
    async with (
        running_fakecloud(cloud_config("cheap")) as cheap,
        running_fakecloud(cloud_config("premium")) as premium,
    ):
        yield {"cheap": cheap, "premium": premium}


@pytest.fixture(autouse=True)
def no_pod_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(admin_client, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-such-token")


def write_config(tmp_path: Path, urls: dict[str, str]) -> str:
    providers: list[dict[str, Any]] = [
        {"name": name, "adapter": "fakecloud", "settings": {"url": url, "timeout_seconds": 2}}
        for name, url in urls.items()
    ]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"node": {"name": NODE}, "providers": providers}))
    return str(path)


async def deploy(server: FakeCloudServer, uid: str, node: str = NODE) -> None:
    adapter = FakeCloudProvider("x", FakeCloudProvider.Settings(url=server.url))
    try:
        await adapter.deploy(
            DeploymentRequest(
                uid=uid,
                namespace="serving",
                name=f"pod-{uid}",
                node_name=node,
                containers=[Container(name="c", image="img:1")],
                gpu_type="A100-SXM-80GB",
                gpu_count=1,
            )
        )
    finally:
        await adapter.close()


async def delete(server: FakeCloudServer, uid: str) -> None:
    adapter = FakeCloudProvider("x", FakeCloudProvider.Settings(url=server.url))
    try:
        await adapter.delete(uid, grace_period_seconds=0)
        while any(d.uid == uid for d in await adapter.list(NODE)):
            await asyncio.sleep(0.05)
    finally:
        await adapter.close()


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


async def test_a_deployment_still_at_a_provider_fails_the_check_until_it_is_gone(
    clouds: dict[str, FakeCloudServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {name: s.url for name, s in clouds.items()})
    await deploy(clouds["premium"], "uid-still-billing")
    await deploy(clouds["cheap"], "uid-of-another-node", node="someone-else")  # not ours: not listed
    assert await cli("uninstall-check", "--config", config, "--providers-only") == 1
    out, err = capsys.readouterr()
    assert "RUNNING  provider premium: deployment of pod uid uid-still-billing" in out
    assert "ok       provider cheap: no deployment labelled for node vk-external" in out
    assert "uid-of-another-node" not in out and "not safe to uninstall: 1 still running" in err
    await delete(clouds["premium"], "uid-still-billing")
    assert await cli("uninstall-check", "--config", config, "--providers-only") == 0
    assert "safe to uninstall" in capsys.readouterr().out


async def test_a_provider_that_cannot_be_asked_fails_the_check(
    clouds: dict[str, FakeCloudServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"cheap": clouds["cheap"].url, "gone": "http://127.0.0.1:9"})
    assert await cli("uninstall-check", "--config", config, "--providers-only") == 1
    out = capsys.readouterr().out
    assert "UNKNOWN  provider gone: could not list its deployments" in out


async def test_the_service_is_asked_and_a_standby_does_not_count(
    clouds: dict[str, FakeCloudServer],
    replicas: dict[str, str],  # noqa: F811 - fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(tmp_path, {"cheap": clouds["cheap"].url})
    base = ("uninstall-check", "--config", config, "--token", "ops-token")
    assert await cli(*base, "--admin", replicas["standby"]) == 1
    out = capsys.readouterr().out
    assert "UNKNOWN  service: only standby replicas answered" in out and "the leader is vkp-a" in out
    assert await cli(*base, "--admin", replicas["standby"], "--admin", replicas["leader"]) == 0
    assert (
        f"ok       service (leader at {replicas['leader']}): 0 pods, 0 deployments" in capsys.readouterr().out
    )
    assert await cli("uninstall-check", "--config", config, "--admin", replicas["leader"]) == 1  # no token
    assert "UNKNOWN  service: the admin API at" in capsys.readouterr().out
