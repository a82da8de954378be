"""Dry-run placement over HTTP ("where would this pod go?") and the shared pod handling.

``explain_router({node: placer, ...})`` gives an ``APIRouter`` for the admin app, over each
virtual node's own placement view (its providers, health and blocklist):

* ``POST /explain`` with a Pod as JSON -> ``{"node", "decision", "table", "annotation", "event"}``,
  ranked from the node's live (cached) catalogs; ``?refresh=true`` refreshes them first.
  Bad input -> 400 with a message naming the field. Nothing is deployed or recorded.
* ``GET /placement`` -> health, breaker, blocklist, budgets and catalog freshness.

``?node=<name>`` answers for that node (404 naming a node not served here); without it, with
several nodes, the top level is the first node's and ``nodes`` lists every node's answer.

The pod helpers here are shared with ``vkprovider explain`` (the CLI sits above this layer).
Placement reads only resources and annotations, so env, volumes and pull secrets are dropped
before translation and no ConfigMap/Secret is ever read for a dry run.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from vkprovider.errors import InvalidRequest
from vkprovider.http.node_param import pick
from vkprovider.models import DeploymentRequest
from vkprovider.placement import Placer, PodContext
from vkprovider.placement.constraints import parse_constraints
from vkprovider.placement.explain import annotation_value, decision_dict, event_message, render_table
from vkprovider.translate import translate_pod

DRY_RUN_UID = "dry-run"
_DROP_FROM_CONTAINERS = ("env", "envFrom", "volumeMounts", "volumeDevices")


class NoObjects:
    """An ObjectSource that resolves nothing (a dry run strips every reference first)."""

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return None

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        return None

    async def list_services(self, namespace: str) -> list[Mapping[str, Any]]:
        return []


def check_pod(pod: Any, where: str) -> dict[str, Any]:
    """A minimal shape check with messages that name the field; translation checks the rest."""
    if not isinstance(pod, dict):
        raise InvalidRequest(f"{where}: expected a Pod object, got {type(pod).__name__}")
    kind = pod.get("kind", "Pod")
    if kind != "Pod":
        raise InvalidRequest(f"{where}: kind: expected Pod, got {kind!r}")
    if not isinstance(pod.get("spec"), dict) or not pod["spec"].get("containers"):
        raise InvalidRequest(f"{where}: spec.containers: a Pod needs at least one container")
    if pod.get("metadata") is not None and not isinstance(pod["metadata"], dict):
        raise InvalidRequest(f"{where}: metadata: expected an object")
    return pod


def placement_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod without what placement never reads, with a dry-run UID and name if missing."""
    view = copy.deepcopy(dict(pod))
    meta = dict(view.get("metadata") or {})
    meta.setdefault("uid", DRY_RUN_UID)
    meta.setdefault("name", DRY_RUN_UID)
    view["metadata"] = meta
    spec = view["spec"]
    for key in ("volumes", "imagePullSecrets"):
        spec.pop(key, None)
    spec["enableServiceLinks"] = False
    for group in ("containers", "initContainers"):
        for container in spec.get(group) or []:
            if isinstance(container, dict):
                for key in _DROP_FROM_CONTAINERS:
                    container.pop(key, None)
    return view


async def pod_request_context(pod: Mapping[str, Any], node_name: str) -> tuple[DeploymentRequest, PodContext]:
    """Translate a (checked) pod leniently into its request and placement context.

    Raises ``InvalidRequest`` for a bad spec or a bad placement annotation, before any I/O.
    """
    view = placement_view(pod)
    translation = await translate_pod(view, node_name=node_name, source=NoObjects())
    request = translation.request
    owners = view["metadata"].get("ownerReferences") or []
    workload = next((o.get("uid") for o in owners if isinstance(o, dict) and o.get("controller")), None)
    parse_constraints(request.annotations)
    return request, PodContext(request.namespace, request.annotations, workload=workload)


def explain_router(placers: Mapping[str, Placer], *, prefix: str = "") -> APIRouter:
    """Routes for the admin app, bound to the service's own placers (node name -> ``Placer``,
    the first the default)."""
    router = APIRouter(prefix=prefix, tags=["placement"])
    several = len(placers) > 1

    @router.post("/explain")
    async def explain(
        http_request: Request, refresh: bool = False, node: str | None = None
    ) -> dict[str, Any]:
        picked = pick(placers, node)
        try:
            body = json.loads(await http_request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HTTPException(400, f"body: not valid JSON: {exc}") from None
        answers = []
        for name, placer in placers.items() if picked is None else [(node or "", picked)]:
            try:
                request, ctx = await pod_request_context(check_pod(body, "body"), name)
            except InvalidRequest as exc:
                raise HTTPException(400, exc.message) from None
            if refresh:
                await placer.refresh()
            decision = placer.rank(request, ctx, detail=True)
            answers.append(
                {
                    "node": name,
                    "decision": decision_dict(decision),
                    "table": render_table(decision),
                    "annotation": annotation_value(decision),
                    "event": event_message(decision),
                }
            )
        return {**answers[0], "nodes": answers} if len(answers) > 1 else answers[0]

    @router.get("/placement")
    async def placement(node: str | None = None) -> dict[str, Any]:
        picked = pick(placers, node)
        if picked is not None:
            return picked.summary()
        if not several:
            return next(iter(placers.values())).summary()
        views = [{"node": name, **placer.summary()} for name, placer in placers.items()]
        return {**views[0], "nodes": views}

    return router
