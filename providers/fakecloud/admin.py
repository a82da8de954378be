"""Test and demo controls under ``/admin``: knobs, capacity, and verbs on deployments.

Never subject to chaos or auth. Secret values are redacted from every admin view: the admin API
is for inspecting what was delivered, not for reading credentials back.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vkprovider.plugins.api import Phase

from .config import Knobs
from .deployment import Deployment, Outcome
from .rules import Rule
from .state import ApiError, Store

admin_router = APIRouter()


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetBody(_Body):
    seed: int | None = None


class CapacityBody(_Body):
    capacity: int = Field(ge=0)


class FailBody(_Body):
    reason: str = "Error"
    message: str = "failed by fakecloud admin"
    exit_code: int = 1


class FinishBody(_Body):
    exit_code: int = 0


class OutageBody(_Body):
    seconds: float = Field(gt=0)
    mode: Literal["error", "hang"] = "error"


class ApiKeysBody(_Body):
    keys: list[str] = Field(description="the keys accepted from now on; empty: no key needed")


class LogBody(_Body):
    lines: list[str]
    container: str = ""


def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def _describe(store: Store, d: Deployment) -> dict[str, Any]:
    """Everything about a deployment, with secret values replaced by a length marker."""
    spec = d.request.model_dump(mode="python")
    for kind in ("containers", "init_containers"):
        for container in spec[kind]:
            for env in container["env"]:
                if env["secret"]:
                    env["value"] = "<redacted>"
            for file in container["files"]:
                content: bytes = file.pop("content")
                file["size"] = len(content)
                file["sha256"] = hashlib.sha256(content).hexdigest()
    for credential in spec["registry_credentials"]:
        credential["password"] = "<redacted>"
    return {
        "uid": d.uid,
        "provider_id": d.provider_id,
        "offer_id": d.offer.id,
        "labels": d.labels,
        "status": store.status(d).model_dump(mode="json"),
        "request": spec,
    }


@admin_router.get("/knobs")
async def get_knobs(request: Request) -> dict[str, Any]:
    return _store(request).knobs.model_dump()


@admin_router.patch("/knobs")
async def patch_knobs(request: Request) -> dict[str, Any]:
    """Merge the given knobs into the current ones (validated; unknown names are refused)."""
    store = _store(request)
    body = await request.json()
    if not isinstance(body, dict):
        raise ApiError(400, "InvalidRequest", "body must be an object of knobs")
    try:
        store.set_knobs(Knobs.model_validate({**store.knobs.model_dump(), **body}))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ApiError(422, "InvalidRequest", f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return store.knobs.model_dump()


@admin_router.post("/reset")
async def reset(request: Request, body: ResetBody | None = None) -> dict[str, str]:
    """Forget every deployment, restore catalog capacity and config knobs, reseed the RNG."""
    _store(request).reset(body.seed if body else None)
    return {"status": "reset"}


@admin_router.get("/offers")
async def offers(request: Request) -> dict[str, int]:
    return {offer_id: o.capacity for offer_id, o in _store(request).offers.items()}


@admin_router.put("/offers/{offer_id}/capacity")
async def set_capacity(request: Request, offer_id: str, body: CapacityBody) -> dict[str, int]:
    store = _store(request)
    if offer_id not in store.offers:
        raise ApiError(404, "NotFound", f"no offer {offer_id!r}")
    store.offers[offer_id].capacity = body.capacity
    return {offer_id: body.capacity}


@admin_router.put("/capacity")
async def set_all_capacity(request: Request, body: CapacityBody) -> dict[str, int]:
    """Set every offer's capacity at once (``0`` = the provider is sold out)."""
    store = _store(request)
    for offer in store.offers.values():
        offer.capacity = body.capacity
    return {offer_id: o.capacity for offer_id, o in store.offers.items()}


@admin_router.get("/deployments")
async def deployments(request: Request) -> list[dict[str, Any]]:
    store = _store(request)
    return [_describe(store, d) for d in store.deployments.values()]


@admin_router.get("/deployments/{uid}")
async def deployment(request: Request, uid: str) -> dict[str, Any]:
    store = _store(request)
    return _describe(store, store.get(uid))


@admin_router.post("/deployments/{uid}/fail")
async def fail(request: Request, uid: str, body: FailBody | None = None) -> dict[str, Any]:
    store, body = _store(request), body or FailBody()
    outcome = Outcome(Phase.FAILED, body.reason, body.message, body.exit_code, store.clock())
    return store.status(store.terminate(uid, outcome)).model_dump(mode="json")


@admin_router.post("/deployments/{uid}/finish")
async def finish(request: Request, uid: str, body: FinishBody | None = None) -> dict[str, Any]:
    """End the run now: exit code 0 → Succeeded (Completed), otherwise Failed (Error)."""
    store, body = _store(request), body or FinishBody()
    phase, reason = (Phase.SUCCEEDED, "Completed") if body.exit_code == 0 else (Phase.FAILED, "Error")
    message = "" if body.exit_code == 0 else f"container exited with code {body.exit_code}"
    outcome = Outcome(phase, reason, message, body.exit_code, store.clock())
    return store.status(store.terminate(uid, outcome)).model_dump(mode="json")


@admin_router.post("/deployments/{uid}/start")
async def start(request: Request, uid: str) -> dict[str, Any]:
    """Skip provisioning: the deployment is running from now on (serving after the usual wait)."""
    store = _store(request)
    return store.status(store.skip_to(uid, "running")).model_dump(mode="json")


@admin_router.post("/deployments/{uid}/serve")
async def serve(request: Request, uid: str) -> dict[str, Any]:
    """Skip to serving: running and Ready now."""
    store = _store(request)
    return store.status(store.skip_to(uid, "serving")).model_dump(mode="json")


@admin_router.post("/deployments/{uid}/lose")
async def lose(request: Request, uid: str) -> dict[str, str]:
    """The deployment vanishes as if the cloud lost it (capacity comes back)."""
    store = _store(request)
    if not store.remove(uid, lost=True):
        raise ApiError(404, "NotFound", f"no deployment for pod uid {uid}")
    return {"status": "lost"}


@admin_router.post("/deployments/{uid}/logs")
async def append_logs(request: Request, uid: str, body: LogBody) -> dict[str, int]:
    store = _store(request)
    d = store.get(uid)
    now = store.clock()
    d.extra_logs.extend((now, body.container, line) for line in body.lines)
    return {"appended": len(body.lines)}


@admin_router.get("/rules")
async def list_rules(request: Request) -> list[dict[str, Any]]:
    return [rule.model_dump() for rule in _store(request).rules.active]


@admin_router.post("/rules", status_code=201)
async def add_rule(request: Request, rule: Rule) -> dict[str, Any]:
    """Inject a fault on one route: ``{"method": "POST", "path": "/v1/deployments", "status": 409,
    "times": 1}`` fails the next create; ``{"path": "/v1/offers", "delay_seconds": 5}`` slows all."""
    return _store(request).rules.add(rule).model_dump()


@admin_router.delete("/rules/{rule_id}")
async def delete_rule(request: Request, rule_id: str) -> dict[str, Any]:
    """Remove a rule; returns it (with its final ``hits``) so callers can keep counting."""
    rule = _store(request).rules.remove(rule_id)
    if rule is None:
        raise ApiError(404, "NotFound", f"no rule {rule_id!r}")
    return rule.model_dump()


@admin_router.delete("/rules")
async def clear_rules(request: Request) -> dict[str, bool]:
    _store(request).rules.clear()
    return {"deleted": True}


@admin_router.get("/stats")
async def stats(request: Request) -> dict[str, Any]:
    """API request counts by ``METHOD /route`` (e.g. to check that ``list`` is one call)."""
    store = _store(request)
    return {
        "requests": dict(store.requests),
        "deployments": len(store.deployments),
        "glitches": dict(store.glitches),
    }


@admin_router.put("/api-keys")
async def set_api_keys(request: Request, body: ApiKeysBody) -> dict[str, int]:
    """Replace the accepted API keys, as a cloud's console does: add the new key while the old
    one still works, then revoke the old one (a rotation). Answers how many are accepted."""
    store = _store(request)
    store.api_keys = {key for key in body.keys if key}
    return {"keys": len(store.api_keys)}


@admin_router.post("/outage")
async def start_outage(request: Request, body: OutageBody) -> dict[str, Any]:
    """Every ``/v1`` call fails for ``seconds`` from now: 503 at once (``error``), or held up to
    ``hang_seconds`` and then 503 (``hang``: clients see timeouts, as with an unreachable cloud)."""
    store = _store(request)
    store.outage_until, store.outage_mode = store.clock() + body.seconds, body.mode
    return {"outage_until": store.wall(store.outage_until), "mode": body.mode}


@admin_router.delete("/outage")
async def end_outage(request: Request) -> dict[str, bool]:
    _store(request).outage_until = None
    return {"outage": _store(request).in_outage()}


@admin_router.get("/ledger")
async def ledger(request: Request) -> dict[str, Any]:
    """The billing ledger (see ledger.py): ``{"now": unix s, "entries": [...]}``, one entry per
    deployment ever accepted since the last reset, ``ended_at`` null while it bills."""
    store = _store(request)
    entries = [entry.model_dump() for entry in store.bills()]
    return {"now": store.wall(), "provider": store.config.provider, "entries": entries}
