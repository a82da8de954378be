"""``vkprovider status`` / ``explain --admin`` against real admin APIs bound off loopback: the
token flags, the pod's ServiceAccount token, errors naming the flag on 401/403/unreachable, and
the leader found among replicas (a standby's ``/state`` says it is one and who leads).

The servers are the service's own admin app and ASGI server; only the apiserver's review APIs
are a fake at the edge (``Reviews``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from kubernetes_asyncio import client

from tests.unit.http.test_auth import Reviews
from vkprovider.cli import admin_client, main
from vkprovider.http.admin import create_admin_app
from vkprovider.http.auth import Authenticator
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient
from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController

GRANTS = {("ops", "get", "proxy"), ("ops", "create", "proxy")}
TOKENS = {"ops-token": "ops", "viewer-token": "viewer"}


@dataclass
class Elector:
    """What readiness reads of the leader elector: whether this replica leads, and who does."""

    is_leader: bool
    leader: str | None


@pytest.fixture
async def replicas() -> AsyncIterator[dict[str, str]]:
    """Two replicas of one node: the leader ``vkp-a`` and the standby ``vkp-b``, each bound to
    0.0.0.0 with authentication on (as deploy/base binds the admin port)."""
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    servers = {}
    for name, leads in (("leader", True), ("standby", False)):
        controller = PodController(KubeClient(api), {}, Placer({}), node_name="vk", host_ip="127.0.0.1")
        controller.elector = Elector(is_leader=leads, leader="vkp-a")
        app = create_admin_app(Placer({}), controller, auth=Authenticator(Reviews(TOKENS, GRANTS), "vk"))
        servers[name] = AsgiServer(app, "0.0.0.0", 0)
        await servers[name].start()
    try:
        yield {name: f"http://127.0.0.1:{server.port}" for name, server in servers.items()}
    finally:
        for server in servers.values():
            await server.stop()
        await api.close()


@pytest.fixture(autouse=True)
def no_pod_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Not in a pod unless a test says so (a developer machine may be one)."""
    monkeypatch.setattr(admin_client, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-such-token")


async def cli(*argv: str) -> int:
    """The CLI in a thread: the servers it reads run on this event loop."""
    return await asyncio.to_thread(main, list(argv))


async def test_a_standby_state_says_so_and_names_the_leader(replicas: dict[str, str]) -> None:
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"{replicas['standby']}/state", headers={"Authorization": "Bearer ops-token"})
    assert resp.json() == {"node": "vk", "role": "standby", "leader": "vkp-a"}  # no zeros to misread


async def test_status_with_a_token_and_a_token_file(
    replicas: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("status", "--admin", replicas["leader"], "--token", "ops-token", "--json") == 0
    assert json.loads(capsys.readouterr().out)["role"] == "leader"
    (tmp_path / "token").write_text("ops-token\n")
    assert await cli("status", "--admin", replicas["leader"], "--token-file", str(tmp_path / "token")) == 0
    assert "node vk (leader)" in capsys.readouterr().out


async def test_status_in_a_pod_sends_its_service_account_token(
    replicas: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = tmp_path / "sa-token"
    token.write_text("ops-token")
    monkeypatch.setattr(admin_client, "SERVICE_ACCOUNT_TOKEN", token)
    assert await cli("status", "--admin", replicas["leader"], "--json") == 0
    assert json.loads(capsys.readouterr().out)["node"] == "vk"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((), ["401", "--token or --token-file"]),
        (("--token", "forged"), ["401", "from --token was not accepted"]),
        (
            ("--token", "viewer-token"),
            ["403", "user=viewer", "'get' on nodes/<node>/proxy", "vkprovider-admin-api"],
        ),
    ],
)
async def test_refusals_name_the_flag(
    replicas: dict[str, str], flags: tuple[str, ...], expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("status", "--admin", replicas["leader"], *flags) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the admin API at ") and all(text in err for text in expected), err


async def test_unreachable_and_unreadable_token_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("status", "--admin", "http://127.0.0.1:9", "--token", "x") == 1
    assert "(--admin) did not answer" in capsys.readouterr().err
    assert await cli("status", "--admin", "http://127.0.0.1:9", "--token-file", str(tmp_path / "none")) == 2
    assert "--token-file: cannot read" in capsys.readouterr().err


async def test_only_a_standby_answering_is_an_error_naming_the_leader(
    replicas: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("status", "--admin", replicas["standby"], "--token", "ops-token") == 3
    err = capsys.readouterr().err
    assert "only standby replicas answered" in err and "the leader is vkp-a" in err
    assert "kubectl -n vkprovider-system exec vkp-a -- vkprovider status" in err


async def test_status_finds_the_leader_among_the_replicas(
    replicas: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = await cli(
        "status",
        "--admin",
        replicas["standby"],
        "--admin",
        replicas["leader"],
        "--token",
        "ops-token",
        "--json",
    )
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["role"] == "leader"
    assert f"{replicas['standby']}: a standby (the leader is vkp-a)" in err


async def test_explain_through_the_leader_needs_create(
    replicas: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
        "spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    args = ("explain", "-f", str(pod), "--admin", replicas["standby"], "--admin", replicas["leader"])
    # No provider is configured: nobody would take the pod (exit 1), but the leader answered.
    assert await cli(*args, "--token", "ops-token") == 1
    assert "decision for pod ns/p" in capsys.readouterr().out
    assert await cli(*args, "--token", "viewer-token") == 1
    assert "'get' on nodes/<node>/proxy" in capsys.readouterr().err


async def test_explain_without_config_asks_the_running_service(
    replicas: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No ``--config`` and no ``--admin``: the admin API at its default address answers (as
    ``vkprovider status`` asks it), so nobody needs the providers' ports (``make demo``'s are random)."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
        "spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    monkeypatch.setattr(admin_client, "DEFAULT_ADMIN", replicas["leader"])
    assert await cli("explain", "-f", str(pod), "--token", "ops-token") == 1  # answered: nobody takes it
    assert "decision for pod ns/p" in capsys.readouterr().out
    monkeypatch.setattr(admin_client, "DEFAULT_ADMIN", "http://127.0.0.1:9")
    assert await cli("explain", "-f", str(pod)) == 1
    assert "the admin API at http://127.0.0.1:9 (--admin) did not answer" in capsys.readouterr().err
