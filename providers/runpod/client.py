"""HTTP calls to the RunPod REST API v2, and the one function that turns failures into error classes.

Shapes follow ``runpod-rest-v2.openapi.json`` (see docs/providers.md). Every call goes through
the kit's ``KeyedHttpClient`` (``send``/``send_json``), so transport failures, HTTP errors and
undecodable bodies are all mapped in one place; callers only ever see the provider error classes.
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
    ProviderError,
    error_body,
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


class RunPodClient(KeyedHttpClient[Op]):
    """Typed calls to the API over one pooled, key-authenticated client (see ``KeyedHttpClient``).

    Failures are read by the shared status table with RunPod's own readings
    (:meth:`error_class`):

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

    def error_detail(self, response: httpx.Response) -> str:
        """``title: detail [errors]`` from an RFC 7807 body, or a clipped raw body."""
        body = error_body(response)
        if isinstance(body, str):
            return body
        parts = [str(body.get("detail") or body.get("title") or response.reason_phrase)]
        errors = body.get("errors")
        if isinstance(errors, list) and errors:
            parts.append("; ".join(str(e) for e in errors[:5]))
        return ": ".join(parts)

    def error_class(self, op: Op, status: int, detail: str) -> type[ProviderError] | None:
        if op is Op.CREATE:
            if status == 403 or (status == 400 and _CAPACITY_WORDING.search(detail)):
                return NoCapacity
            if status == 404:
                return InvalidRequest
        return None

    async def list_gpu_types(self, *, cloud: str, availability: bool = True) -> list[Any]:
        params: dict[str, str] = {"cloud": cloud, "include": "AVAILABILITY", "product": "POD"}
        if not availability:
            params = {}
        body = await self.send_json(Op.CATALOG, "GET", "/v2/catalog/gpus", params=params)
        return self.list_field(Op.CATALOG, body, "gpus")

    async def list_pods(self) -> list[Any]:
        return self.list_field(Op.READ, await self.send_json(Op.READ, "GET", "/v2/pods"), "pods")

    async def get_pod(self, pod_id: str) -> Any:
        return await self.send_json(Op.READ, "GET", f"/v2/pods/{pod_id}")

    async def create_pod(self, body: dict[str, Any]) -> Any:
        return await self.send_json(Op.CREATE, "POST", "/v2/pods", json=body)

    async def delete_pod(self, pod_id: str) -> None:
        """Terminate (a pod already gone is ``NotFound``, which the adapter kit tolerates)."""
        await self.send(Op.DELETE, "DELETE", f"/v2/pods/{pod_id}")

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
