"""HTTP calls to the RunPod REST API v2, and the one function that turns failures into error classes.

Shapes follow ``runpod-rest-v2.openapi.json`` (see docs/providers.md). Every call goes through
``_request`` so that transport failures, HTTP errors and undecodable bodies are all mapped in
``map_error``; callers only ever see the provider error classes.
"""

from __future__ import annotations

import enum
import re
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from vkprovider.plugins.api import (
    InvalidRequest,
    KeyedHttpClient,
    NoCapacity,
    NotFound,
    ProviderError,
    Transient,
    error_body,
    json_body,
    require_field,
    response_error,
    transport_error,
)


class Op(enum.Enum):
    """What was being attempted; the same status means different things on different calls."""

    CATALOG = "catalog"
    CREATE = "create"
    READ = "read"
    DELETE = "delete"
    LOGS = "logs"


#: RunPod's 400 on create covers rule violations *and* "could not place"; only the human-readable
#: ``detail`` tells them apart (the spec says so), so capacity wording is recognised here.
_CAPACITY_WORDING = re.compile(
    r"no (longer )?(any )?(instances?|gpus?|machines?|capacity|resources?|hosts?)"
    r"( are| is)? (currently )?available"
    r"|capacity|could not (be )?(placed|place|scheduled|schedule)|out of stock|not enough (gpus?|resources?)"
    r"|insufficient (capacity|resources?|gpus?)|unavailable",
    re.IGNORECASE,
)


def _detail(response: httpx.Response) -> str:
    """``title: detail [errors]`` from an RFC 7807 body, or a clipped raw body."""
    body = error_body(response)
    if isinstance(body, str):
        return body
    parts = [str(body.get("detail") or body.get("title") or response.reason_phrase)]
    errors = body.get("errors")
    if isinstance(errors, list) and errors:
        parts.append("; ".join(str(e) for e in errors[:5]))
    return ": ".join(parts)


def _runpod_reading(op: Op, status: int, detail: str) -> type[ProviderError] | None:
    """Where RunPod departs from the shared status table (``None``: the table decides)."""
    if op is Op.CREATE:
        if status == 403 or (status == 400 and _CAPACITY_WORDING.search(detail)):
            return NoCapacity
        if status == 404:
            return InvalidRequest
    return None


def map_error(
    provider: str, op: Op, *, response: httpx.Response | None = None, exc: Exception | None = None
) -> ProviderError:
    """The single mapping from a failed RunPod call to a provider error class.

    The shared table (``vkprovider.plugins.api.error_for_status``) with RunPod's own readings:

    * transport errors, timeouts, 5xx, undecodable bodies → ``Transient``
    * 429 → ``Transient`` with ``retry_after`` from ``Retry-After`` (integer seconds on this API)
    * 401 → ``QuotaOrBilling``: a bad or revoked key fails every call, so the provider must be
      taken out of rotation and an operator alerted; failing pods one by one would not help
    * 402 → ``QuotaOrBilling`` (insufficient balance)
    * 403 → on create ``NoCapacity`` (the spec: "account cannot access the requested pool — skip
      this candidate"); elsewhere ``QuotaOrBilling`` (the key lacks a permission)
    * 400 → on create ``NoCapacity`` if the detail reads as capacity, else ``InvalidRequest``
    * 404 → ``NotFound``, except on create (unknown template/GPU id) → ``InvalidRequest``
    * 409, 422 and other 4xx → ``InvalidRequest``
    """
    if exc is not None:
        return transport_error(op.value, exc, provider=provider)
    assert response is not None
    detail = _detail(response)
    return response_error(
        response,
        op.value,
        detail,
        provider=provider,
        override=_runpod_reading(op, response.status_code, detail),
    )


class RunPodClient(KeyedHttpClient[Op]):
    """Typed calls to the API over one pooled, key-authenticated client (see ``KeyedHttpClient``)."""

    def map_error(
        self, op: Op, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        return map_error(self._provider, op, response=response, exc=exc)

    def _object(self, op: Op, response: httpx.Response, key: str | None = None) -> Any:
        body = json_body(response, op.value, provider=self._provider)
        if key is not None:
            body = require_field(body, key, op.value, provider=self._provider)
        return body

    async def list_gpu_types(self, *, cloud: str, availability: bool = True) -> list[Any]:
        params: dict[str, str] = {"cloud": cloud, "include": "AVAILABILITY", "product": "POD"}
        if not availability:
            params = {}
        response = await self.send(Op.CATALOG, "GET", "/v2/catalog/gpus", params=params)
        gpus = self._object(Op.CATALOG, response, "gpus")
        if not isinstance(gpus, list):
            raise Transient("catalog: 'gpus' is not a list", provider=self._provider)
        return gpus

    async def list_pods(self) -> list[Any]:
        response = await self.send(Op.READ, "GET", "/v2/pods")
        pods = self._object(Op.READ, response, "pods")
        if not isinstance(pods, list):
            raise Transient("read: 'pods' is not a list", provider=self._provider)
        return pods

    async def get_pod(self, pod_id: str) -> Any:
        response = await self.send(Op.READ, "GET", f"/v2/pods/{pod_id}")
        return self._object(Op.READ, response)

    async def create_pod(self, body: dict[str, Any]) -> Any:
        response = await self.send(Op.CREATE, "POST", "/v2/pods", json=body)
        return self._object(Op.CREATE, response)

    async def delete_pod(self, pod_id: str) -> None:
        """Terminate; a pod that is already gone counts as deleted."""
        try:
            await self.send(Op.DELETE, "DELETE", f"/v2/pods/{pod_id}")
        except NotFound:
            return

    async def stream_logs(self, pod_id: str, params: dict[str, str | int]) -> AsyncGenerator[str, None]:
        """Yield the raw SSE lines of ``GET /v2/pods/{id}/logs`` (the caller parses events).

        Over the log-stream pool: a follow stream holds its connection as long as the reader
        likes, and must never take one that status reads, deploys or deletes need."""
        async with self.stream(
            Op.LOGS, "GET", f"/v2/pods/{pod_id}/logs", params=params, headers={"Accept": "text/event-stream"}
        ) as response:
            try:
                async for line in response.aiter_lines():
                    yield line
            except httpx.HTTPError as exc:
                raise self.failure(Op.LOGS, exc=exc) from None
