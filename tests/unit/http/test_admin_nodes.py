"""The admin API of a process serving several virtual nodes (``nodes:``): every view answers
per node (``?node=``, else all of them), an unknown node is a 404 naming it, and a caller must be
allowed ``nodes/<node>/proxy`` on every node an answer speaks for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.placement.placement_support import MemProvider, offer
from vkprovider.cli import admin_client, main
from vkprovider.http.admin import create_admin_app
from vkprovider.http.auth import Authenticator
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient
from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController

NODES = ("vk-a", "vk-b")
POD = {
    "kind": "Pod",
    "spec": {"containers": [{"name": "s", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


class NodeReviews:
    """The apiserver's review APIs: ``grants`` are (user, verb, node) on ``nodes/<node>/proxy``."""

    def __init__(self, grants: set[tuple[str, str, str]]) -> None:
        self.grants = grants
        self.asked: list[str] = []

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        if body["kind"] == "TokenReview":
            user = body["spec"]["token"].removesuffix("-token")
            return {"status": {"authenticated": True, "user": {"username": user, "groups": []}}}
        attrs = body["spec"]["resourceAttributes"]
        self.asked.append(attrs["name"])
        allowed = (
            attrs["subresource"] == "proxy"
            and (body["spec"]["user"], attrs["verb"], attrs["name"]) in self.grants
        )
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC rule"}}


@pytest.fixture
async def admin() -> AsyncIterator[tuple[str, NodeReviews]]:
    reviews = NodeReviews(
        {("a-only", "get", "vk-a"), ("b-writer", "create", "vk-b")}
        | {("ops", verb, node) for verb in ("get", "create") for node in NODES}
    )
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    views = []
    for node, price in zip(NODES, (2.0, 3.0), strict=True):
        provider = f"cloud-{node}"
        placer = Placer({provider: MemProvider(provider, [offer(provider, "h100", price)])})
        await placer.refresh()
        views.append(
            (
                placer,
                PodController(KubeClient(api), placer.providers, placer, node_name=node, host_ip="127.0.0.1"),
                None,
                None,
            )
        )
    (placer, controller, _, _), *others = views
    app = create_admin_app(placer, controller, auth=Authenticator(reviews, "vk-a"), others=others)
    server = AsgiServer(app, "0.0.0.0", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", reviews
    finally:
        await server.stop()
        await api.close()


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}-token"}


async def test_views_answer_per_node_and_an_unknown_node_is_a_404_naming_it(
    admin: tuple[str, NodeReviews],
) -> None:
    url, _ = admin
    async with httpx.AsyncClient(base_url=url, headers=bearer("ops")) as http:
        state = (await http.get("/state")).json()
        assert state["node"] == "vk-a" and [n["node"] for n in state["nodes"]] == list(NODES)
        only_b = (await http.get("/state", params={"node": "vk-b"})).json()
        assert only_b["node"] == "vk-b" and "nodes" not in only_b
        assert list(only_b["providers"]) == ["cloud-vk-b"]

        placement = (await http.get("/placement")).json()
        assert [n["node"] for n in placement["nodes"]] == list(NODES)
        assert [sorted(n["providers"]) for n in placement["nodes"]] == [["cloud-vk-a"], ["cloud-vk-b"]]
        b_placement = (await http.get("/placement", params={"node": "vk-b"})).json()
        assert sorted(b_placement["providers"]) == ["cloud-vk-b"]

        explained = (await http.post("/explain", params={"node": "vk-b"}, json=POD)).json()
        assert explained["node"] == "vk-b"
        assert explained["decision"]["chosen"]["provider"] == "cloud-vk-b"
        both = (await http.post("/explain", json=POD)).json()
        assert [(n["node"], n["decision"]["chosen"]["provider"]) for n in both["nodes"]] == [
            ("vk-a", "cloud-vk-a"),
            ("vk-b", "cloud-vk-b"),
        ]

        for method, path in (("GET", "/state"), ("GET", "/placement"), ("POST", "/explain")):
            missing = await http.request(method, path, params={"node": "vk-z"}, json=POD)
            assert missing.status_code == 404, (path, missing.text)
            assert "vk-z" in missing.json()["detail"] and "vk-a, vk-b" in missing.json()["detail"]

        metrics = (await http.get("/metrics")).text
    queues = [
        s
        for f in text_string_to_metric_families(metrics)
        for s in f.samples
        if s.name == "vkprovider_queue_depth"
    ]
    assert queues == []  # neither node leads a term here: no state series (labels: test_service_metrics)


async def test_a_caller_needs_every_node_the_answer_speaks_for(admin: tuple[str, NodeReviews]) -> None:
    url, reviews = admin
    async with httpx.AsyncClient(base_url=url, headers=bearer("a-only")) as http:
        assert (await http.get("/state", params={"node": "vk-a"})).status_code == 200
        denied = await http.get("/state", params={"node": "vk-b"})
        assert denied.status_code == 403 and "name=vk-b" in denied.text
        every = await http.get("/state")  # lists both nodes: needs both
        assert every.status_code == 403 and "name=vk-b" in every.text
        # an unknown name is checked against every node first: no node list for a stranger
        assert (await http.get("/state", params={"node": "vk-z"})).status_code == 403
    async with httpx.AsyncClient(base_url=url, headers=bearer("b-writer")) as http:
        assert (await http.post("/explain", params={"node": "vk-b"}, json=POD)).status_code == 200
        explain_all = await http.post("/explain", json=POD)  # may create on vk-b only
        assert explain_all.status_code == 403 and "name=vk-a" in explain_all.text
    assert set(reviews.asked) == set(NODES)


async def test_the_explain_cli_asks_the_node_it_names(
    admin: tuple[str, NodeReviews],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``vkprovider explain --admin URL --node-name <node>``: that node's placement view answers;
    a node the service does not serve is refused, naming it."""
    url, _ = admin
    monkeypatch.setattr(admin_client, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-such-token")
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(POD))
    args = ["explain", "-f", str(pod), "--admin", url, "--token", "ops-token"]
    assert await asyncio.to_thread(main, [*args, "--node-name", "vk-b"]) == 0
    out = capsys.readouterr().out
    assert "cloud-vk-b" in out and "cloud-vk-a" not in out
    assert await asyncio.to_thread(main, [*args, "--node-name", "vk-z"]) == 1
    err = capsys.readouterr().err
    assert "answered 404" in err and "'vk-z': not a node this process serves" in err
