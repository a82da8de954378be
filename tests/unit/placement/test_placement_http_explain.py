"""The admin dry-run router, driven through ASGI in-process (no sockets)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI
from placement_support import MemProvider, offer, placer_for

from vkprovider.http.explain import explain_router

POD = {
    "kind": "Pod",
    "metadata": {"name": "llm", "namespace": "serving", "annotations": {"vkprovider.io/max-price": "3"}},
    "spec": {"containers": [{"name": "s", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


async def client_for(*providers: MemProvider) -> tuple[httpx.AsyncClient, Any]:
    placer: Any = await placer_for(*providers)
    app = FastAPI()
    app.include_router(explain_router({"vk": placer}, prefix="/admin"))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://admin"), placer


async def test_explain_returns_decision_table_annotation_and_event() -> None:
    a = MemProvider("a", [offer("a", "a1", 2.0), offer("a", "a2", 5.0, region="eu")])
    b = MemProvider("b", [offer("b", "b1", 2.5, gpu="L4")])
    client, placer = await client_for(a, b)
    async with client:
        resp = await client.post("/admin/explain", content=json.dumps(POD))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["decision"]["chosen"]["offer"] == "a1"
    assert body["decision"]["rejected"] == {"max-price": 1}
    assert "*1" in body["table"] and "a1" in body["table"]
    assert json.loads(body["annotation"])["chosen"]["provider"] == "a"
    assert body["event"].startswith("best candidate a/a1")
    assert placer.placed("dry-run") is None and a.deploy_calls == []  # nothing deployed or recorded


async def test_bad_input_is_400_with_a_message() -> None:
    client, _ = await client_for(MemProvider("a", [offer("a", "a1", 2.0)]))
    bad_annotation = json.loads(json.dumps(POD))
    bad_annotation["metadata"]["annotations"]["vkprovider.io/max-price"] = "lots"
    cases = [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a Pod object"),
        (json.dumps({"kind": "Service", "spec": {}}), "kind: expected Pod"),
        (json.dumps({"kind": "Pod", "spec": {"containers": []}}), "spec.containers"),
        (json.dumps(bad_annotation), "vkprovider.io/max-price"),
    ]
    async with client:
        for body, message in cases:
            resp = await client.post("/admin/explain", content=body)
            assert resp.status_code == 400, (body, resp.text)
            assert message in resp.json()["detail"]


async def test_placement_status() -> None:
    client, placer = await client_for(MemProvider("a", [offer("a", "a1", 2.0)]))
    placer.blocklist.add("a", "H100-SXM-80GB", "us-east", "sold out")
    async with client:
        resp = await client.get("/admin/placement")
    body = resp.json()
    assert body["breaker_open"] is False
    assert body["blocklist"][0]["reason"] == "sold out"
    assert set(body["providers"]) == {"a"}
