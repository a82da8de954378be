"""The fakecloud FastAPI application: API under ``/v1``, test controls under ``/admin``.

Chaos (latency, 5xx, 429, hangs, outage) is applied by one middleware to ``/v1`` only, so the
admin endpoint always works and tests can turn the misbehaviour off again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from .admin import admin_router
from .config import FakeCloudConfig, Knobs
from .routes import api_router
from .state import ApiError, Store
from .usage import load_router, usage_router
from .wire import API_PREFIX


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def _authorized(store: Store, request: Request) -> bool:
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    return scheme == "Bearer" and key in store.api_keys


def _applies(knobs: Knobs, request: Request) -> bool:
    path_ok = not knobs.paths or any(request.url.path.startswith(p) for p in knobs.paths)
    method_ok = not knobs.methods or request.method.upper() in (m.upper() for m in knobs.methods)
    return path_ok and method_ok


async def _chaos(store: Store, request: Request) -> Response | None:
    """Misbehave as the knobs say. Draws the same random numbers on every request so a seeded
    run is reproducible whichever knobs are on."""
    knobs = store.knobs
    if store.in_outage():
        if store.outage_mode == "hang" and store.outage_until is not None:
            await asyncio.sleep(max(0.0, min(knobs.hang_seconds, store.outage_until - store.clock())))
        return error_response(503, "Unavailable", f"{store.config.provider} is down (outage)")
    rule = store.rules.take(request.method, request.url.path)
    if rule is not None:
        if rule.delay_seconds:
            await asyncio.sleep(rule.delay_seconds)
        if rule.status is not None:
            headers = {"Retry-After": f"{rule.retry_after:g}"} if rule.retry_after is not None else None
            return error_response(rule.status, rule.error_code, rule.message, headers)
    if not _applies(knobs, request):
        return None
    jitter, hang, limited, failed, ambiguous = (store.rng.random() for _ in range(5))
    request.state.ambiguous = ambiguous < knobs.ambiguous_create_rate
    delay = knobs.latency_seconds + jitter * knobs.jitter_seconds
    if delay > 0:
        await asyncio.sleep(delay)
    if hang < knobs.timeout_rate:
        # Take the whole request first: the client gives up during the hang, and the request is
        # still processed afterwards, as a real cloud may do with a create it already received.
        with contextlib.suppress(ClientDisconnect):
            await request.body()
        await asyncio.sleep(knobs.hang_seconds)
    if limited < knobs.rate_limit_rate:
        retry = f"{knobs.retry_after_seconds:g}"
        return error_response(429, "RateLimited", "too many requests", {"Retry-After": retry})
    if failed < knobs.error_rate:
        return error_response(knobs.error_status, "InternalError", "injected server error")
    return None


async def _maybe_ambiguous(store: Store, request: Request, response: Response) -> Response:
    """A create that happened, answered with a 5xx: the client cannot tell it from a failure."""
    if (
        request.method == "POST"
        and request.url.path == API_PREFIX + "/deployments"
        and response.status_code in (200, 201)
        and getattr(request.state, "ambiguous", False)
    ):
        body = getattr(response, "body_iterator", None)
        if body is not None:
            async for _ in body:  # drain the real answer the client will never see
                pass
        status = store.knobs.ambiguous_status
        return error_response(status, "InternalError", "injected: the create may or may not have happened")
    return response


def create_app(config: FakeCloudConfig, *, store: Store | None = None) -> FastAPI:
    """A fresh app with its own state (``app.state.store``); tests may pass a store with a fake clock."""
    app = FastAPI(title=f"fakecloud ({config.provider})", version="1")
    app.state.store = store or Store(config)
    app.include_router(api_router, prefix=API_PREFIX)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process serves (for a readiness probe): no key and no chaos, unlike ``/v1/health``,
        so a key the cloud requires, or a simulated outage, does not take the pod out of its
        Service (the clients would then see a connection error, not the cloud's answer)."""
        return {"status": "ok"}

    app.include_router(admin_router, prefix="/admin")
    app.include_router(usage_router, prefix=API_PREFIX)
    app.include_router(load_router, prefix="/admin")

    @app.middleware("http")
    async def chaos_and_auth(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        store: Store = request.app.state.store
        if not request.url.path.startswith(API_PREFIX + "/"):
            return await call_next(request)
        response = await _chaos(store, request)
        if response is None and store.api_keys and not _authorized(store, request):
            response = error_response(401, "Unauthorized", "missing or wrong API key")
        if response is None:
            response = await call_next(request)
            response = await _maybe_ambiguous(store, request, response)
        route_path = getattr(request.scope.get("route"), "path", None)
        if route_path is None:
            route_path = request.url.path
        elif not route_path.startswith(API_PREFIX + "/"):
            route_path = API_PREFIX + route_path  # some FastAPI versions report it without the prefix
        key = f"{request.method} {route_path}"
        store.requests[key] = store.requests.get(key, 0) + 1
        return response

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message)

    @app.exception_handler(ClientDisconnect)
    async def gone(_: Request, exc: ClientDisconnect) -> Response:
        """The client gave up (its deadline passed during a hang): nobody reads the answer."""
        return Response(status_code=499)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields = "; ".join(
            ".".join(str(p) for p in e["loc"]) + ": " + str(e["msg"]) for e in exc.errors()[:5]
        )
        return error_response(422, "InvalidRequest", fields or "invalid request")

    return app
