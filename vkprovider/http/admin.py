"""The admin API (plain HTTP on 127.0.0.1 by default): health, readiness, metrics, state, and
the placement dry-run (``POST /explain`` with a Pod, ``GET /placement``).

``/readyz`` is true for a leader (or the only replica) once the pod controller has synced its
caches *in the current term*, and for a standby replica, which says it is one (and who leads).
``/state`` is the operator's view (``vkprovider status`` renders it): per provider its health,
breaker, catalog age, pods and spend; spend per provider and namespace; blocklist entries with
their expiry; the queue. On a standby replica ``/state`` is only ``{"node", "role": "standby",
"leader"}``: it holds no term, so it has no counts to give (zeros there once misled an uninstall).
With several virtual nodes (``nodes:``) each view speaks per node: ``?node=<name>`` answers for
that node alone (a node this process does not serve: 404 naming it); without it the top level
is the first node's and ``nodes`` lists every node's answer in that same shape (a replica may
lead some nodes and stand by for others). ``/metrics`` labels each node's state series ``node``.

``/healthz``, ``/readyz`` and ``/metrics`` are open (probes, Prometheus). ``/state``,
``/placement`` and ``/explain`` (which can call providers) need an authenticated, authorized
caller when an ``Authenticator`` is given, which the service does whenever the admin API binds
anything but loopback (:func:`vkprovider.http.auth.is_loopback_bind`): allowed
``nodes/<node>/proxy`` on every node the answer speaks for (the ``?node=`` one, else all). Off loopback it serves TLS
(``http.tls_cert_file``/``http.tls_key_file``) or refuses bearer tokens from other hosts, which
plain HTTP would carry in clear text. No OpenAPI schema or docs are served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vkprovider.http.auth import Authenticator, AuthMiddleware, admin_attributes, admin_protects
from vkprovider.http.explain import explain_router
from vkprovider.http.metrics import service_registry
from vkprovider.http.node_param import answered_for, pick
from vkprovider.http.state import operator_state
from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController


class _NodeView(Protocol):
    @property
    def backend_up(self) -> bool: ...


class _GateView(Protocol):
    def snapshot(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AdminNode:
    """What the admin API reads of one virtual node."""

    placer: Placer
    controller: PodController
    node: _NodeView | None = None
    gate: _GateView | None = None


def create_admin_app(
    placer: Placer,
    controller: PodController,
    node: _NodeView | None = None,
    gate: _GateView | None = None,
    *,
    auth: Authenticator | None = None,
    others: Sequence[tuple[Placer, PodController, _NodeView | None, _GateView | None]] = (),
) -> FastAPI:
    """The admin API of the first node (``placer``, ``controller``, ``node``) and ``others``,
    the process's further virtual nodes (``nodes:``): every view answers per node (module
    docstring) and ``/readyz`` is ready only when every node is."""
    every = [AdminNode(placer, controller, node, gate), *(AdminNode(*o) for o in others)]
    served = {n.controller.node_name: n for n in every}
    names = list(served)
    app = FastAPI(title="vkprovider admin", docs_url=None, redoc_url=None, openapi_url=None)
    if auth is not None:
        app.add_middleware(
            AuthMiddleware,
            auth=auth,
            attributes=admin_attributes,
            protects=admin_protects,
            nodes=lambda scope: answered_for(scope, names),
        )
    app.include_router(explain_router({name: n.placer for name, n in served.items()}))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(response: Response) -> dict[str, Any]:
        ready, detail = controller.readiness()
        if len(served) > 1:
            each = {name: n.controller.readiness() for name, n in served.items()}
            ready = all(r for r, _ in each.values())
            detail = {**detail, "ready": ready, "nodes": {name: d for name, (_, d) in each.items()}}
        response.status_code = 200 if ready else 503
        return detail

    registry = service_registry([(n.controller, n.placer) for n in every])

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/state")
    async def state(node: str | None = None) -> dict[str, Any]:
        picked = pick(served, node)
        if picked is not None:
            return node_state(picked.placer, picked.controller, picked.node, picked.gate)
        views = [node_state(n.placer, n.controller, n.node, n.gate) for n in every]
        return {**views[0], "nodes": views} if len(views) > 1 else views[0]

    return app


def node_state(
    placer: Placer, controller: PodController, node: _NodeView | None, gate: _GateView | None
) -> dict[str, Any]:
    """One node's operator view (the whole ``/state`` of a one-node process)."""
    ready, detail = controller.readiness()
    if detail.get("role") == "standby":
        # A standby holds no term: its counts would be zeros while the leader's deployments
        # run and bill. Say what it is and who leads instead (``vkprovider status`` follows).
        return {"node": controller.node_name, "role": "standby", "leader": detail.get("leader")}
    return {
        "node": controller.node_name,
        "role": detail.get("role"),
        "synced": ready,
        "backend_up": node.backend_up if node is not None else None,
        "pods": len(controller.informer.cache),
        "queue": {"waiting": len(controller.queue), "busy": controller.queue.busy},
        "deployments": len(controller.tracker.deployments),
        "orphans_deleted": controller.orphans_deleted,
        "api_calls": controller.kube.calls,
        "placement": placer.summary(),
        **operator_state(placer, controller),
        "gate": gate.snapshot() if gate is not None else None,  # docs/gate.md
    }
