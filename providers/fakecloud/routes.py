"""The fakecloud REST API (``/v1``); see docs/fakecloud.md for the reference."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import ValidationError

from vkprovider.plugins.api import DeploymentRequest

from .deployment import Deployment
from .glitches import glitch_list, still_deleting
from .lifecycle import log_lines
from .state import ApiError, Store
from .wire import NODE_SELECTOR_PARAM, decode_request, parse_selector

api_router = APIRouter()


def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def _status_json(store: Store, deployment: Deployment) -> dict[str, Any]:
    return store.status(deployment).model_dump(mode="json")


def _selector(raw: str | None) -> dict[str, str]:
    try:
        return parse_selector(raw)
    except ValueError as exc:
        raise ApiError(400, "InvalidRequest", str(exc)) from None


def _echo(request: DeploymentRequest) -> str:
    """What a careless cloud answers: the request's values quoted back (``echo_input`` knob), so
    tests can prove the service keeps secret values out of what it shows."""
    env = [f"{e.name}={e.value}" for c in request.containers for e in c.env]
    files = [f"{f.path}={base64.b64encode(f.content).decode()}" for c in request.containers for f in c.files]
    creds = [f"{r.username}:{r.password}@{r.server}" for r in request.registry_credentials]
    return f"refused: env {' '.join(env)}; files {' '.join(files)}; registry {' '.join(creds)}"


@api_router.get("/health")
async def health(request: Request) -> dict[str, str]:
    return {"status": "ok", "provider": _store(request).config.provider}


@api_router.get("/offers")
async def offers(request: Request) -> list[dict[str, Any]]:
    store = _store(request)
    return [
        {**o.entry.model_dump(mode="json"), "offer_id": o.entry.id, "capacity": o.capacity}
        for o in store.offers.values()
    ]


@api_router.post("/deployments")
async def create(request: Request) -> JSONResponse:
    store = _store(request)
    try:
        body = await request.json()
    except ValueError:
        raise ApiError(400, "InvalidRequest", "body is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "InvalidRequest", "body must be an object")
    labels = body.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ApiError(400, "InvalidRequest", "labels must be a map of strings")
    try:
        deployment_request = decode_request(body.get("request"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(422, "InvalidRequest", f"request.{where}: {first['msg']}") from None
    except ValueError as exc:
        raise ApiError(422, "InvalidRequest", f"request: {exc}") from None
    if not deployment_request.containers:
        raise ApiError(422, "InvalidRequest", "request.containers: at least one container is required")
    if store.knobs.echo_input:
        raise ApiError(422, "InvalidRequest", _echo(deployment_request))
    deployment, created = store.create(deployment_request, labels)
    return JSONResponse(_status_json(store, deployment), status_code=201 if created else 200)


@api_router.get("/deployments")
async def list_deployments(
    request: Request, label_selector: str | None = Query(default=None, alias=NODE_SELECTOR_PARAM)
) -> list[dict[str, Any]]:
    store = _store(request)
    selector = _selector(label_selector)
    found = store.roll_losses(store.select(selector)) + still_deleting(store, selector)
    return glitch_list(store, [_status_json(store, d) for d in found])


@api_router.get("/deployments/{uid}")
async def get_deployment(request: Request, uid: str) -> dict[str, Any]:
    store = _store(request)
    deleting = {d.uid: d for d in still_deleting(store)}
    if uid in deleting:  # an asynchronous delete still in flight: reported as it was
        return _status_json(store, deleting[uid])
    deployment = store.get(uid)
    if not store.roll_losses([deployment]):
        raise ApiError(404, "NotFound", f"no deployment for pod uid {uid}")
    return _status_json(store, deployment)


@api_router.get("/deployments/{uid}/endpoints")
async def get_endpoints(request: Request, uid: str) -> dict[str, Any]:
    """How a client reaches the deployment: its address and container port → port (all equal
    here). No addresses until it runs, or when the ``routable`` knob is off."""
    store = _store(request)
    return store.endpoints(store.get(uid)).model_dump(mode="json")


@api_router.delete("/deployments/{uid}", status_code=204)
async def delete_deployment(request: Request, uid: str) -> Response:
    """204: gone (also an unknown UID); 202: accepted, an asynchronous delete still in flight
    (``delete_delay_seconds``), so the client confirms with ``get``."""
    store = _store(request)
    store.remove(uid)
    in_flight = any(d.uid == uid for d in still_deleting(store))
    return Response(status_code=202 if in_flight else 204)


def _lines(store: Store, d: Deployment, container: str) -> list[tuple[float, str]]:
    """(time, text) of the container's lines so far; times only grow, so an index resumes a stream."""
    return [
        (at, text) for at, name, text in log_lines(d, store.config, store.clock()) if name in ("", container)
    ]


def _format(d: Deployment, lines: list[tuple[float, str]], timestamps: bool) -> bytes:
    out = []
    for at, text in lines:
        if timestamps:
            stamp = datetime.fromtimestamp(d.created_wall.timestamp() + at - d.created, UTC)
            out.append(stamp.isoformat().replace("+00:00", "Z") + " ")
        out.append(text + "\n")
    return "".join(out).encode()


@api_router.get("/deployments/{uid}/logs")
async def logs(
    request: Request,
    uid: str,
    container: str = "",
    follow: bool = False,
    tail_lines: int | None = Query(default=None, ge=0),
    since_seconds: int | None = Query(default=None, ge=0),
    limit_bytes: int | None = Query(default=None, ge=1),
    timestamps: bool = False,
) -> Response:
    store = _store(request)
    deployment = store.get(uid)
    names = [c.name for c in deployment.request.containers]
    name = container or names[0]
    if name not in names:
        raise ApiError(404, "NotFound", f"container {name!r} not found in deployment {uid}")
    lines = _lines(store, deployment, name)
    position = len(lines)
    if since_seconds is not None:
        lines = [line for line in lines if line[0] >= store.clock() - since_seconds]
    if tail_lines is not None:
        lines = lines[len(lines) - tail_lines :] if tail_lines else []
    first = _format(deployment, lines, timestamps)
    if not follow:
        return PlainTextResponse(first[:limit_bytes] if limit_bytes else first)

    async def stream() -> AsyncIterator[bytes]:
        budget, data, pos = limit_bytes, first, position
        while True:
            if budget is not None:
                data, budget = data[:budget], budget - min(budget, len(data))
            if data:
                yield data
            if budget == 0 or store.deployments.get(uid) is not deployment:
                return
            if store.status(deployment).phase.terminal:
                rest = _lines(store, deployment, name)[pos:]
                if rest and budget != 0:
                    yield _format(deployment, rest, timestamps)[:budget]
                return
            await asyncio.sleep(store.config.lifecycle.watch_poll_seconds)
            current = _lines(store, deployment, name)
            data, pos = _format(deployment, current[pos:], timestamps), len(current)

    return StreamingResponse(stream(), media_type="text/plain")


@api_router.get("/watch")
async def watch(
    request: Request, label_selector: str | None = Query(default=None, alias=NODE_SELECTOR_PARAM)
) -> StreamingResponse:
    """NDJSON: ``{"type": "status", "status": {...}}`` on every change (current state first),
    ``{"type": "heartbeat"}`` when idle; a lost deployment is reported as phase Unknown."""
    store = _store(request)
    selector = _selector(label_selector)
    life = store.config.lifecycle

    async def stream() -> AsyncIterator[bytes]:
        sent: dict[str, dict[str, Any]] = {}
        idle = 0.0
        ends_at = store.clock() + store.knobs.watch_max_seconds if store.knobs.watch_max_seconds else None
        while True:
            if ends_at is not None and store.clock() >= ends_at:
                store.glitches["watch_ended"] = store.glitches.get("watch_ended", 0) + 1
                return  # the stream simply ends (a load balancer's idle cut, a server restart)
            lines = []
            current = {d.uid: _status_json(store, d) for d in store.select(selector)}
            for uid, status in current.items():
                if sent.get(uid) != status:
                    sent[uid] = status
                    lines.append({"type": "status", "status": status})
            for uid in [u for u in sent if u not in current]:
                del sent[uid]
                if uid in store.lost:
                    lost = store.lost_status(uid).model_dump(mode="json")
                    lines.append({"type": "status", "status": lost})
            if not lines and idle >= life.watch_heartbeat_seconds:
                lines.append({"type": "heartbeat"})
            if lines:
                idle = 0.0
                yield "".join(json.dumps(line) + "\n" for line in lines).encode()
            await asyncio.sleep(life.watch_poll_seconds)
            idle += life.watch_poll_seconds

    return StreamingResponse(stream(), media_type="application/x-ndjson")
