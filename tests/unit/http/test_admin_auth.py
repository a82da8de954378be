"""The admin API on a non-loopback bind: probes open, operator views need an authorized caller."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from kubernetes_asyncio import client

from tests.unit.http.test_auth import Reviews
from vkprovider.http.admin import create_admin_app
from vkprovider.http.auth import Authenticator, is_loopback_bind
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient
from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController


@pytest.fixture
async def admin() -> AsyncIterator[tuple[str, Reviews]]:
    host = "0.0.0.0"  # every interface: what a Deployment's probes and Prometheus need
    assert not is_loopback_bind(host)
    reviews = Reviews(
        {"ops-token": "ops", "viewer-token": "viewer"}, {("ops", "get", "proxy"), ("ops", "create", "proxy")}
    )
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    controller = PodController(KubeClient(api), {}, Placer({}), node_name="vk", host_ip="127.0.0.1")
    server = AsgiServer(create_admin_app(Placer({}), controller, auth=Authenticator(reviews, "vk")), host, 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", reviews
    finally:
        await server.stop()
        await api.close()


async def test_views_need_a_token_and_nodes_proxy_probes_stay_open(admin: tuple[str, Reviews]) -> None:
    url, reviews = admin
    async with httpx.AsyncClient(base_url=url) as http:
        for path in ("/healthz", "/metrics"):
            assert (await http.get(path)).status_code == 200
        assert (await http.get("/readyz")).status_code == 503  # not synced: but answered, no auth
        for path in ("/state", "/placement"):
            resp = await http.get(path)
            assert resp.status_code == 401 and "bearer token" in resp.text
        assert (await http.post("/explain", json={})).status_code == 401
        bad = await http.get("/state", headers={"Authorization": "Bearer forged"})
        assert bad.status_code == 401
        viewer = await http.get("/state", headers={"Authorization": "Bearer viewer-token"})
        assert (
            viewer.status_code == 403 and "user=viewer" in viewer.text and "subresource=proxy" in viewer.text
        )
        ops = await http.get("/state", headers={"Authorization": "Bearer ops-token"})
        assert ops.status_code == 200 and ops.json()["node"] == "vk"
    assert not any("Bearer" in str(body) for body in reviews.seen)
