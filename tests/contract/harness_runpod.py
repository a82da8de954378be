"""Contract harness for the RunPod adapter: a respx-backed, in-memory RunPod REST v2.

The fake keeps pods in a dict and answers with the shapes of ``runpod-rest-v2.openapi.json``
(pods are the spec's published example re-filled from the create request; create bodies are
validated against ``CreatePodRequest`` when the spec is available). Knobs turn into the HTTP
answers the real API gives (422, 400 "no instances available", 402, 503 + Retry-After), so the
adapter's own error mapping is what the suite exercises. respx lives in this process, so the
in-process and gRPC variants run; the plugin-subprocess variant is skipped.
"""

from __future__ import annotations

import copy
import itertools
import json
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

BASE = "https://runpod.fake.test"
#: contract operation → the fake endpoint group its HTTP call hits
ENDPOINT = {
    "probe": "pods",
    "list": "pods",
    "get": "pods",
    "offers": "catalog",
    "deploy": "create",
    "delete": "delete",
}
PHASE_TO_STATUS = {Phase.PENDING: "PROVISIONING", Phase.RUNNING: "RUNNING", Phase.FAILED: "ERROR"}


def http_error(error: ProviderError) -> httpx.Response:
    """The answer the real API gives for a failure of this class (RFC 7807 body)."""
    status, detail, headers = 503, error.message, {}
    if isinstance(error, InvalidRequest):
        status = 422
    elif isinstance(error, NoCapacity):
        status, detail = 400, f"There are no instances available: {error.message}"
    elif isinstance(error, QuotaOrBilling):
        status = 402
    elif isinstance(error, NotFound):
        status = 404
    elif isinstance(error, Transient) and error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    body = {"title": "Error", "status": status, "detail": detail}
    return httpx.Response(status, json=body, headers=headers)


class FakeRunPod(KnobbedCloud):
    """Pods, catalog and knobs; every handler first applies the knobs of its endpoint."""

    def __init__(self) -> None:
        super().__init__()
        helper = load_spec_helper()
        try:
            self.spec = helper.runpod() if helper is not None else None
        except BaseException:  # pytest.skip when the spec file is absent: run unvalidated
            self.spec = None
        self.pods: dict[str, dict[str, Any]] = {}
        self.ids = itertools.count(1)
        r = self.router
        r.get(f"{BASE}/v2/catalog/gpus").mock(side_effect=self.catalog)
        r.get(f"{BASE}/v2/pods").mock(side_effect=self.list_pods)
        r.post(f"{BASE}/v2/pods").mock(side_effect=self.create)
        r.get(url__regex=rf"^{BASE}/v2/pods/(?P<pod_id>[^/]+)/logs").mock(side_effect=self.logs)
        r.get(url__regex=rf"^{BASE}/v2/pods/(?P<pod_id>[^/?]+)$").mock(side_effect=self.get_pod)
        r.delete(url__regex=rf"^{BASE}/v2/pods/(?P<pod_id>[^/?]+)$").mock(side_effect=self.delete)
        r.route().pass_through()  # anything else (other harnesses' servers) is real traffic

    def http_error(self, error: ProviderError) -> httpx.Response:
        return http_error(error)

    async def catalog(self, request: httpx.Request) -> httpx.Response:
        if (failed := await self.knobs("catalog")) is not None:
            return failed
        gpu = {
            "id": "NVIDIA GeForce RTX 4090",
            "name": "RTX 4090",
            "pool": "ADA_24",
            "manufacturer": "NVIDIA",
            "memory": 24,
            "secure": True,
            "community": True,
            "price": {"secure": 0.44, "community": 0.31},
            "maxCount": {"secure": 8, "community": 4},
            "availability": "HIGH",
            "dataCenters": [{"id": "US-KS-2", "name": "US Kansas 2", "availability": "HIGH"}],
        }
        return httpx.Response(200, json={"gpus": [gpu]})

    async def list_pods(self, request: httpx.Request) -> httpx.Response:
        if (failed := await self.knobs("pods")) is not None:
            return failed
        return httpx.Response(200, json={"pods": list(self.pods.values())})

    async def get_pod(self, request: httpx.Request, pod_id: str) -> httpx.Response:
        if (failed := await self.knobs("pods")) is not None:
            return failed
        pod = self.pods.get(pod_id)
        if pod is None:
            return http_error(NotFound("pod not found"))
        return httpx.Response(200, json=pod)

    async def create(self, request: httpx.Request) -> httpx.Response:
        if (failed := await self.knobs("create")) is not None:
            return failed
        body = json.loads(request.content)
        if self.spec is not None:
            self.spec.validate_request("post", "/v2/pods", body)
        pod_id = f"pod{next(self.ids)}"
        pod = {
            "id": pod_id,
            "name": body["name"],
            "image": body["image"],
            "args": body.get("args", ""),
            "disk": body.get("disk", 20),
            "ports": body.get("ports", []),
            "env": body.get("env", {}),
            "registry": None,
            "status": "PROVISIONING",
            "actions": ["terminate"],
            "mounts": {},
            "gpu": body["gpu"],
            "cloud": body.get("cloud", "SECURE"),
            "dataCenterId": (body.get("dataCenterIds") or ["US-KS-2"])[0],
            "cudaVersion": "12.8",
            "ssh": {"proxy": None, "direct": None},
            "template": None,
            "cost": 0.44 * body["gpu"].get("count", 1),
            "locked": False,
            "globalNetworking": {"enabled": False},
            "runtime": None,
            "createdAt": "2026-06-01T12:00:00Z",
            "startedAt": None,
        }
        if self.spec is not None:
            self.spec.validate_schema("Pod", pod)
        self.pods[pod_id] = pod
        return httpx.Response(201, json=copy.deepcopy(pod))

    async def delete(self, request: httpx.Request, pod_id: str) -> httpx.Response:
        if (failed := await self.knobs("delete")) is not None:
            return failed
        if self.pods.pop(pod_id, None) is None:
            return http_error(NotFound("pod not found"))
        return httpx.Response(204)

    async def logs(self, request: httpx.Request, pod_id: str) -> httpx.Response:
        if pod_id not in self.pods:
            return http_error(NotFound("pod not found"))
        events = [
            'id: 2026-06-01T12:02:03Z/1\ndata: {"ts":"2026-06-01T12:02:03Z","source":"container","line":"loading"}\n',
            'id: 2026-06-01T12:02:04Z/2\ndata: {"ts":"2026-06-01T12:02:04Z","source":"container","line":"ready"}\n',
        ]
        return httpx.Response(200, text="\n".join(events), headers={"Content-Type": "text/event-stream"})


class RunPodHarness(RespxHarness):
    adapter = "runpod"
    endpoints = ENDPOINT
    fake: FakeRunPod

    def settings(self) -> dict[str, Any]:
        return {"base_url": BASE, "api_key": "contract-test-key", "log_idle_seconds": 0.5}

    def request(self, uid: str, node_name: str) -> DeploymentRequest:
        return DeploymentRequest(
            uid=uid,
            namespace="default",
            name=f"pod-{uid[:8]}",
            node_name=node_name,
            containers=[
                Container(
                    name="main",
                    image="ghcr.io/example/infer:1",
                    ports=[Port(container_port=8000, name="http")],
                )
            ],
            gpu_type="RTX-4090-24GB",
            gpu_count=1,
            offer_id="SECURE/US-KS-2/NVIDIA GeForce RTX 4090/1",
        )

    async def advance(self, uid: str, phase: Phase) -> None:
        if phase not in PHASE_TO_STATUS:
            raise NotImplementedError(f"RunPod has no status for {phase.value}")
        for pod in self.fake.pods.values():
            if pod["env"].get("VKPROVIDER_POD_UID") == uid:
                pod["status"] = PHASE_TO_STATUS[phase]
                # As RunPod does: a running pod's runtime maps each exposed port to a public one.
                running = pod["status"] == "RUNNING"
                pod["runtime"] = (
                    {
                        "uptime": 0,
                        "ports": [
                            {
                                "private": int(p.split("/")[0]),
                                "public": 40000 + i,
                                "type": p.split("/")[1],
                                "ip": "198.51.100.7",
                            }
                            for i, p in enumerate(pod["ports"])
                        ],
                    }
                    if running
                    else None
                )
                return
        raise KeyError(uid)


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    yield RunPodHarness(FakeRunPod())  # its router is started per test: RunPodHarness.active
