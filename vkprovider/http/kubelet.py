"""The kubelet API of the virtual node (TLS on ``node.kubelet_port``), what the apiserver proxies
``kubectl logs``, ``nodes/<n>/proxy`` and metrics-server scrapes to.

Routes: ``/containerLogs/{ns}/{pod}/{container}`` (:mod:`.kubelet_logs`), ``/pods``,
``/runningpods/``, ``/stats/summary`` and ``/metrics/resource`` (:mod:`.kubelet_stats`),
``/healthz``. ``/exec``, ``/attach``, ``/portForward`` and ``/run`` answer 501 naming the pod's
provider and the capability it lacks (no provider here offers a shell), never a 404.
Every request is authenticated and authorized first (:mod:`.auth`). The pods come from the pod
controller's informer cache, their providers from its deployment tracker.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any, Protocol

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from vkprovider.http.auth import Authenticator, AuthMiddleware
from vkprovider.http.kubelet_logs import check_container, first_chunk, log_options, stream_logs
from vkprovider.http.kubelet_stats import UsageCollector, resource_metrics, stats_summary
from vkprovider.http.log_caps import LogStreamCaps, LogStreamLimiter
from vkprovider.plugins.api import Provider

JSON = dict[str, Any]


class _Tracked(Protocol):
    @property
    def provider(self) -> str: ...


class _Tracker(Protocol):
    def get(self, uid: str) -> Any: ...


class _Informer(Protocol):
    @property
    def cache(self) -> Mapping[str, JSON]: ...


class PodSource(Protocol):
    """What the kubelet API reads from the pod controller."""

    node_name: str

    @property
    def informer(self) -> _Informer: ...

    @property
    def tracker(self) -> _Tracker: ...

    @property
    def providers(self) -> Mapping[str, Provider]: ...


def server_tls(cert_file: str, key_file: str, client_ca_file: str | None) -> ssl.SSLContext:
    """Serving context: our certificate; client certificates verified against the client CA when
    one is given (optional, like the kubelet: a token is the other way in)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _pod_list(items: list[JSON]) -> JSON:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}


def _running(pod: JSON) -> JSON | None:
    """A ``/runningpods/`` entry: identity plus the containers that run (as the kubelet gives)."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    running = [s for s in statuses if "running" in (s.get("state") or {})]
    if pod.get("status", {}).get("phase") != "Running" or not running:
        return None
    meta = pod.get("metadata", {})
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta},
        "spec": {"containers": [{"name": s.get("name"), "image": s.get("image")} for s in running]},
        "status": {},
    }


def create_kubelet_app(source: PodSource, auth: Authenticator, log_caps: LogStreamCaps | None = None) -> Any:
    app = FastAPI(title="vkprovider kubelet API", docs_url=None, redoc_url=None, openapi_url=None)
    collector = UsageCollector(source.node_name)
    log_streams = LogStreamLimiter(log_caps or LogStreamCaps())

    def pods() -> list[JSON]:
        return list(source.informer.cache.values())

    def pod_or_404(namespace: str, name: str) -> JSON:
        pod = source.informer.cache.get(f"{namespace}/{name}")
        if pod is None:
            raise HTTPException(404, f"pod {namespace}/{name} not found on node {source.node_name}")
        return pod

    def provider_of(pod: JSON) -> tuple[str, Provider]:
        meta = pod.get("metadata", {})
        tracked = source.tracker.get(str(meta.get("uid", "")))
        name = getattr(tracked, "provider", None)
        provider = source.providers.get(name) if isinstance(name, str) else None
        if provider is None or not isinstance(name, str):
            raise HTTPException(
                404, f"pod {meta.get('namespace')}/{meta.get('name')} has no deployment at any provider yet"
            )
        return name, provider

    @app.exception_handler(HTTPException)
    async def plain_error(_request: Request, exc: HTTPException) -> Response:
        return PlainTextResponse(f"{exc.detail}\n", status_code=exc.status_code, headers=exc.headers)

    @app.get("/healthz")
    async def healthz() -> Response:
        return PlainTextResponse("ok")

    @app.get("/pods")
    @app.get("/pods/")
    async def list_pods() -> JSONResponse:
        return JSONResponse(_pod_list(pods()))

    @app.get("/runningpods/")
    @app.get("/runningpods")
    async def running_pods() -> JSONResponse:
        return JSONResponse(_pod_list([r for p in pods() if (r := _running(p)) is not None]))

    @app.get("/containerLogs/{namespace}/{name}/{container}")
    async def container_logs(request: Request, namespace: str, name: str, container: str) -> Response:
        query = dict(request.query_params)
        options = log_options(container, query)  # 400s first: a bad request is bad for any pod
        pod = pod_or_404(namespace, name)
        check_container(pod, container)
        if query.get("previous", "").lower() in {"true", "1"}:
            raise HTTPException(400, f'previous terminated container "{container}" in pod "{name}" not found')
        provider_name, provider = provider_of(pod)
        uid = str(pod["metadata"].get("uid", ""))
        return await first_chunk(stream_logs(provider, provider_name, uid, options, log_streams))

    async def usage() -> tuple[list[Any], bool]:
        by_uid = {str(p.get("metadata", {}).get("uid", "")): p for p in pods()}
        return await collector.collect(source.providers, by_uid)

    @app.get("/metrics/resource")
    async def metrics_resource() -> Response:
        found, failed = await usage()
        return PlainTextResponse(
            resource_metrics(found, collector, failed), media_type="text/plain; version=0.0.4"
        )

    @app.get("/stats/summary")
    async def summary() -> JSONResponse:
        found, _ = await usage()
        return JSONResponse(stats_summary(found, collector))

    for verb in ("exec", "attach", "portForward", "run"):

        async def unsupported(request: Request, namespace: str, name: str, verb: str = verb) -> Response:
            pod = pod_or_404(namespace, name)
            provider_name, _ = provider_of(pod)
            raise HTTPException(
                501,
                f"{verb}: provider {provider_name!r} of pod {namespace}/{name} does not offer the "
                f"{verb!r} capability",
            )

        for path in (f"/{verb}/{{namespace}}/{{name}}", f"/{verb}/{{namespace}}/{{name}}/{{rest:path}}"):
            app.add_api_route(path, unsupported, methods=["GET", "POST"])

    return AuthMiddleware(app, auth)
