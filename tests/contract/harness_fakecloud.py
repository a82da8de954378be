"""fakecloud in the contract suite: a real fakecloud server on 127.0.0.1 for the whole session.

Knobs go through fakecloud's admin API (``/admin/rules`` for one-shot errors and delays, the
deployment verbs for lifecycle moves), so they reach the in-process, gRPC and subprocess variants
alike. Provisioning is set to an hour so deployments move only when the suite says so, and serving
follows running at once (the suite expects the first Running status to be Ready).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from vkprovider_fakecloud.config import parse_config
from vkprovider_fakecloud.server import FakeCloudServer, running_fakecloud

from vkprovider.contract.harness import DelayStats, Harness, Op
from vkprovider.plugins.api import (
    InvalidRequest,
    NoCapacity,
    NotFound,
    Phase,
    ProviderError,
    QuotaOrBilling,
    Transient,
)

#: Contract operation → the fakecloud route that implements it.
ROUTES: dict[Op, tuple[str, str]] = {
    "probe": ("GET", "/v1/health"),
    "offers": ("GET", "/v1/offers"),
    "deploy": ("POST", "/v1/deployments"),
    "get": ("GET", "/v1/deployments/{uid}"),
    "list": ("GET", "/v1/deployments"),
    "delete": ("DELETE", "/v1/deployments/{uid}"),
}

CONFIG: dict[str, Any] = {
    "provider": "fakecloud-contract",
    "seed": 1,
    "catalog": [
        {
            "id": "a100",
            "gpu_type": "A100-SXM4-80GB",
            "region": "eu-west",
            "price_per_hour": 1.5,
            "capacity": 10000,
        },
        {"id": "h100", "gpu_type": "H100 SXM", "region": "eu-west", "price_per_hour": 2.5, "capacity": 10000},
    ],
    "lifecycle": {
        "provisioning_seconds": 3600,
        "serving_after_seconds": 0,
        "watch_poll_seconds": 0.02,
        "watch_heartbeat_seconds": 1,
    },
}


def _status_for(error: ProviderError) -> int:
    if isinstance(error, Transient):
        return 429 if error.retry_after is not None else 503
    statuses: dict[type[ProviderError], int] = {
        InvalidRequest: 400,
        NoCapacity: 409,
        QuotaOrBilling: 402,
        NotFound: 404,
    }
    return statuses.get(type(error), 500)


class FakeCloudHarness(Harness):
    adapter = "fakecloud"
    shared_backend = True

    def __init__(self, server: FakeCloudServer, admin: httpx.AsyncClient) -> None:
        self.server = server
        self.admin = admin
        self._delay_rule: dict[Op, str] = {}
        #: hits of delay rules already removed, so ``started`` only ever grows
        self._retired: dict[Op, int] = {}

    def settings(self) -> dict[str, Any]:
        return {"url": self.server.url, "timeout_seconds": 10.0}

    async def _post(self, path: str, json: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.admin.post(path, json=json)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    async def fail_next(self, op: Op, error: ProviderError) -> None:
        method, path = ROUTES[op]
        rule = {
            "method": method,
            "path": path,
            "status": _status_for(error),
            "code": error.code,
            "message": error.message,
            "retry_after": getattr(error, "retry_after", None),
            "times": 1,
        }
        await self._post("/rules", rule)

    async def delay(self, op: Op, seconds: float) -> None:
        previous = self._delay_rule.pop(op, None)
        if previous is not None:
            removed = await self.admin.delete(f"/rules/{previous}")
            if removed.status_code == 200:
                self._retired[op] = self._retired.get(op, 0) + removed.json()["hits"]
        if seconds > 0:
            method, path = ROUTES[op]
            rule = await self._post("/rules", {"method": method, "path": path, "delay_seconds": seconds})
            self._delay_rule[op] = rule["id"]

    async def delay_stats(self, op: Op) -> DelayStats:
        """``started`` counts requests the delay rules held. The server cannot see a client give up
        on a held request, so ``cancelled`` is unknown."""
        active = self._delay_rule.get(op)
        rules = (await self.admin.get("/rules")).json()
        held = sum(r["hits"] for r in rules if r["id"] == active)
        return DelayStats(started=self._retired.get(op, 0) + held, cancelled=None)

    async def advance(self, uid: str, phase: Phase) -> None:
        if phase is Phase.RUNNING:
            await self._post(f"/deployments/{uid}/serve")
        elif phase is Phase.SUCCEEDED:
            await self._post(f"/deployments/{uid}/finish", {"exit_code": 0})
        elif phase is Phase.FAILED:
            await self._post(
                f"/deployments/{uid}/fail", {"reason": "Error", "message": "failed by the suite"}
            )
        elif phase is not Phase.PENDING:
            raise NotImplementedError(f"fakecloud cannot move a deployment to {phase.value}")


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with (
        running_fakecloud(parse_config(CONFIG, "harness_fakecloud")) as server,
        httpx.AsyncClient(base_url=server.url + "/admin", timeout=10.0) as admin,
    ):
        yield FakeCloudHarness(server, admin)
