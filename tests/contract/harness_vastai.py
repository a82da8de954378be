"""Contract harness for the Vast.ai adapter: a respx-backed, in-memory Vast.ai API.

Instances live in a dict and are shaped like the spec's published instance examples (the list
endpoint's item schema); create bodies are validated against the ``PUT /api/v0/asks/{id}``
request schema when the spec is available. Knobs become the HTTP answers the real API gives
(400 ``invalid_args``, 410 ``no_such_ask``, 401, 503 + Retry-After), so the adapter's own
mapping is exercised. respx lives in this process: in-process and gRPC variants run, the
plugin-subprocess variant is skipped.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.contract.respx_cloud import KnobbedCloud, RespxHarness, load_spec_helper
from vkprovider.contract.harness import Harness
from vkprovider.plugins.api import (
    Container,
    DeploymentRequest,
    InvalidRequest,
    NoCapacity,
    NotFound,
    Phase,
    Port,
    ProviderError,
    QuotaOrBilling,
    Transient,
)

BASE = "https://vast.fake.test"
LOGS = "https://logs.vast.fake.test"
ASK_ID = 1001
ENDPOINT = {
    "probe": "instances",
    "list": "instances",
    "get": "instances",
    "offers": "search",
    "deploy": "create",
    "delete": "destroy",
}
PHASE_TO_STATUS = {
    Phase.PENDING: "loading",
    Phase.RUNNING: "running",
    Phase.FAILED: "exited",
    Phase.UNKNOWN: "unknown",
}


def http_error(error: ProviderError) -> httpx.Response:
    status, body, headers = 503, {"success": False, "error": "server_error", "msg": error.message}, {}
    if isinstance(error, InvalidRequest):
        status, body["error"] = 400, "invalid_args"
    elif isinstance(error, NoCapacity):
        status, body["error"] = 410, "no_such_ask"
    elif isinstance(error, QuotaOrBilling):
        status, body["error"] = 401, "auth_error"
    elif isinstance(error, NotFound):
        status, body["error"] = 404, "not_found"
    elif isinstance(error, Transient) and error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    return httpx.Response(status, json=body, headers=headers)


class FakeVast(KnobbedCloud):
    def __init__(self) -> None:
        super().__init__()
        helper = load_spec_helper()
        try:
            self.spec = helper.vastai() if helper is not None else None
        except BaseException:  # pytest.skip when the spec file is absent: run unvalidated
            self.spec = None
        self.instances: dict[int, dict[str, Any]] = {}
        self.exposed: dict[int, list[str]] = {}  #: instance id -> container ports its create exposed
        self.ids = itertools.count(5000)
        r = self.router
        r.post(f"{BASE}/api/v0/bundles").mock(side_effect=self.search)
        r.put(url__regex=rf"^{BASE}/api/v0/asks/(?P<ask>\d+)$").mock(side_effect=self.create)
        r.get(f"{BASE}/api/v1/instances").mock(side_effect=self.list_instances)
        r.get(url__regex=rf"^{BASE}/api/v0/instances/(?P<iid>\d+)$").mock(side_effect=self.show)
        r.delete(url__regex=rf"^{BASE}/api/v0/instances/(?P<iid>\d+)$").mock(side_effect=self.destroy)
        r.put(url__regex=rf"^{BASE}/api/v0/instances/request_logs/(?P<iid>\d+)$").mock(
            side_effect=self.request_logs
        )
        r.get(url__regex=rf"^{LOGS}/(?P<iid>\d+)\.log$").mock(side_effect=self.log_file)
        r.route().pass_through()

    def http_error(self, error: ProviderError) -> httpx.Response:
        return http_error(error)

    async def search(self, request: httpx.Request) -> httpx.Response:
        if (failed := await self.knobs("search")) is not None:
            return failed
        offer = {
            "id": ASK_ID,
            "gpu_name": "RTX 4090",
            "num_gpus": 1,
            "gpu_ram": 24564,
            "dph_total": 0.35,
            "min_bid": 0.2,
            "geolocation": "Texas, US",
            "rentable": True,
            "rented": False,
            "cpu_cores_effective": 8,
            "cpu_ram": 32768,
        }
        return httpx.Response(200, json={"offers": [offer]})

    async def create(self, request: httpx.Request, ask: str) -> httpx.Response:
        if (failed := await self.knobs("create")) is not None:
            return failed
        body = json.loads(request.content)
        if self.spec is not None:
            self.spec.validate_request("put", "/api/v0/asks/{id}", body)
        if int(ask) != ASK_ID:
            return http_error(NoCapacity(f"no_such_ask Instance type by id {ask} is not available."))
        instance_id = next(self.ids)
        self.exposed[instance_id] = re.findall(r"-p (\d+):\d+", body.get("env", ""))
        self.instances[instance_id] = {
            "id": instance_id,
            "actual_status": None,
            "intended_status": "running",
            "cur_state": "running",
            "label": body.get("label"),
            "image_uuid": body["image"],
            "image_args": body.get("args", []),
            "extra_env": [],
            "status_msg": None,
            "public_ipaddr": "203.0.113.7",
            "ports": None,
            "dph_total": 0.35,
            "start_date": 1780000000.0,
            "gpu_name": "RTX 4090",
            "num_gpus": 1,
        }
        return httpx.Response(200, json={"success": True, "new_contract": instance_id})

    async def list_instances(self, request: httpx.Request) -> httpx.Response:
        if (failed := await self.knobs("instances")) is not None:
            return failed
        items = sorted(self.instances.values(), key=lambda i: i["id"])
        token = request.url.params.get("after_token")
        start = int(token) if token else 0
        page = items[start : start + 25]
        next_token = str(start + 25) if start + 25 < len(items) else None
        body = {"success": True, "instances_found": len(page), "next_token": next_token, "instances": page}
        if self.spec is not None:
            self.spec.validate_response("get", "/api/v1/instances", 200, body)
        return httpx.Response(200, json=copy.deepcopy(body))

    async def show(self, request: httpx.Request, iid: str) -> httpx.Response:
        if (failed := await self.knobs("instances")) is not None:
            return failed
        return httpx.Response(200, json={"instances": copy.deepcopy(self.instances.get(int(iid)))})

    async def destroy(self, request: httpx.Request, iid: str) -> httpx.Response:
        if (failed := await self.knobs("destroy")) is not None:
            return failed
        if self.instances.pop(int(iid), None) is None:
            return http_error(NotFound("Instance not found"))
        return httpx.Response(200, json={"success": True, "msg": "Instance destroyed successfully"})

    async def request_logs(self, request: httpx.Request, iid: str) -> httpx.Response:
        if int(iid) not in self.instances:
            return httpx.Response(404, json={"error": "invalid_id", "msg": "Invalid instance id."})
        return httpx.Response(200, json={"success": True, "result_url": f"{LOGS}/{iid}.log", "msg": "ok"})

    async def log_file(self, request: httpx.Request, iid: str) -> httpx.Response:
        if "authorization" in request.headers:
            return httpx.Response(400, text="the API key must not be sent to the log store")
        return httpx.Response(200, content=b"loading\nready\n")


class VastAiHarness(RespxHarness):
    adapter = "vastai"
    endpoints = ENDPOINT
    fake: FakeVast

    def settings(self) -> dict[str, Any]:
        return {"base_url": BASE, "api_key": "contract-test-key", "log_fetch_interval_seconds": 0.05}

    def request(self, uid: str, node_name: str) -> DeploymentRequest:
        return DeploymentRequest(
            uid=uid,
            namespace="default",
            name=f"pod-{uid[:8]}",
            node_name=node_name,
            containers=[
                Container(name="main", image="ghcr.io/example/infer:1", ports=[Port(container_port=8000)])
            ],
            gpu_type="RTX-4090-24GB",
            gpu_count=1,
            offer_id=str(ASK_ID),
        )

    async def advance(self, uid: str, phase: Phase) -> None:
        if phase not in PHASE_TO_STATUS:
            raise NotImplementedError(f"Vast.ai has no status for {phase.value}")
        for instance in self.fake.instances.values():
            if str(instance.get("label", "")).endswith(f":{uid}"):
                instance["actual_status"] = PHASE_TO_STATUS[phase]
                # As Vast.ai does: ``ports`` (Docker's map) is present on running instances only.
                exposed = self.fake.exposed.get(instance["id"], [])
                instance["ports"] = (
                    {
                        f"{p}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(41000 + i)}]
                        for i, p in enumerate(exposed)
                    }
                    if instance["actual_status"] == "running"
                    else None
                )
                return
        raise KeyError(uid)


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    yield VastAiHarness(FakeVast())  # its router is started per test: VastAiHarness.active
