"""Simulated CPU and memory use, following a load an operator (or a test) turns up and down.

``GET /v1/usage`` reports, for every running deployment matching the node selector, each
container's cumulative CPU seconds, current CPU rate and memory working set — what a real
cloud's metrics API would give and what the kubelet API turns into ``kubectl top`` figures.
The load is a knob (``PUT /admin/load``): ``cpu_cores`` per container, or ``total_cpu_cores``
shared by all running deployments (so scaling out lowers each one's share, as real traffic
spread by a Service would, and an HPA settles). Memory grows with the CPU rate
(``memory_bytes`` + ``memory_bytes_per_core`` x rate). CPU seconds are integrated per
container between samples, at the rate in force, so the counters only ever go up.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from vkprovider.plugins.api import Phase

from .deployment import Deployment
from .state import ApiError, Store
from .wire import NODE_SELECTOR_PARAM, parse_selector

usage_router = APIRouter()
load_router = APIRouter()


class Load(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpu_cores: float = Field(default=0.05, ge=0, description="CPU rate of each container")
    total_cpu_cores: float | None = Field(
        default=None, ge=0, description="if set: shared by every running deployment instead"
    )
    memory_bytes: int = Field(default=128 * 2**20, ge=0)
    memory_bytes_per_core: int = Field(default=256 * 2**20, ge=0)


class Meter:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.load = Load()
        self._acc: dict[tuple[str, str], tuple[float, float]] = {}  #: (uid, container) → (t, cpu s)

    def _running(self) -> list[Deployment]:
        return [d for d in self.store.deployments.values() if self.store.status(d).phase == Phase.RUNNING]

    def rate(self, running: int) -> float:
        if self.load.total_cpu_cores is not None:
            return self.load.total_cpu_cores / max(1, running)
        return self.load.cpu_cores

    def sample(self, selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Advance every running container's counter to now; report those matching ``selector``."""
        now = self.store.clock()
        running = self._running()
        rate = self.rate(len(running))
        out = []
        live = set()
        for d in running:
            started = d.created + self.store.config.lifecycle.provisioning_seconds
            containers = []
            for c in d.request.containers:
                key = (d.uid, c.name)
                live.add(key)
                last, total = self._acc.get(key, (started, 0.0))
                total += rate * max(0.0, now - max(last, started))
                self._acc[key] = (now, total)
                containers.append(
                    {
                        "name": c.name,
                        "cpu_seconds_total": round(total, 6),
                        "cpu_cores": round(rate, 6),
                        "memory_working_set_bytes": int(
                            self.load.memory_bytes + self.load.memory_bytes_per_core * rate
                        ),
                    }
                )
            if selector is None or all(d.labels.get(k) == v for k, v in selector.items()):
                stamp = d.created_wall + timedelta(seconds=now - d.created)
                out.append(
                    {"uid": d.uid, "timestamp": stamp.astimezone(UTC).isoformat(), "containers": containers}
                )
        self._acc = {k: v for k, v in self._acc.items() if k in live}
        return out

    def set(self, load: Load) -> None:
        self.sample()  # settle the counters at the old rate first
        self.load = load


def meter(request: Request) -> Meter:
    state = request.app.state
    store: Store = state.store
    found: Meter | None = getattr(state, "meter", None)
    if found is None or found.store is not store:
        found = state.meter = Meter(store)
    return found


@usage_router.get("/usage")
async def usage(
    request: Request, label_selector: str | None = Query(default=None, alias=NODE_SELECTOR_PARAM)
) -> list[dict[str, Any]]:
    try:
        selector = parse_selector(label_selector) if label_selector else None
    except ValueError as exc:
        raise ApiError(400, "InvalidRequest", str(exc)) from None
    return meter(request).sample(selector)


@load_router.get("/load")
async def get_load(request: Request) -> dict[str, Any]:
    return meter(request).load.model_dump()


@load_router.put("/load")
async def put_load(request: Request, body: Load) -> dict[str, Any]:
    meter(request).set(body)
    return {**body.model_dump(), "at": datetime.now(UTC).isoformat()}
