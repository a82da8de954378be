"""HTTP calls to the Vast.ai REST API, and the one function that turns failures into error classes.

Shapes follow ``vastai.openapi.yaml`` (see docs/providers.md). Paths are written exactly as the
spec lists them (no trailing slash). Every call goes through the kit's ``KeyedHttpClient``
(``send_json``), so transport failures, HTTP errors and undecodable bodies are mapped in one place.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from vkprovider.plugins.api import (
    InvalidRequest,
    KeyedHttpClient,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaOrBilling,
    Transient,
    error_body,
)

log = logging.getLogger(__name__)


class Op(enum.Enum):
    """What was being attempted; Vast.ai reuses status codes with per-endpoint meanings."""

    SEARCH = "search"
    CREATE = "create"
    READ = "read"
    DELETE = "delete"
    LOGS = "logs"


_BILLING_WORDING = re.compile(r"credit|balance|billing|payment", re.IGNORECASE)
_CAPACITY_WORDING = re.compile(
    r"no_such_ask|not available|no longer available|unavailable|rented", re.IGNORECASE
)


class VastClient(KeyedHttpClient[Op]):
    """Typed calls to the API over one pooled, key-authenticated client (see ``KeyedHttpClient``).

    Failures are read by the shared status table with Vast.ai's own readings (:meth:`error_class`):

    * transport errors, timeouts, 5xx → ``Transient``; 429 → ``Transient`` honouring ``Retry-After``
    * 401, 402, and any 400/403 mentioning credit/balance → ``QuotaOrBilling`` (stop, alert)
    * 404 on offer search → ``QuotaOrBilling``: the spec documents it as "invalid or missing API key"
    * 404/410 on create (offer gone or taken) and 400/403 on create that read as an unavailable
      ask → ``NoCapacity``; other 400/403 on create (``invalid_args``, ``invalid_price``…) →
      ``InvalidRequest``
    * 404 on read/delete/logs → ``NotFound``; 403 elsewhere → ``QuotaOrBilling`` (key lacks access)
    * other 4xx (and an unexpected 1xx/3xx) → ``InvalidRequest``
    """

    def error_detail(self, response: httpx.Response) -> str:
        """``error: msg`` (or ``detail``) from a Vast.ai error body, or a clipped raw body."""
        body = error_body(response)
        if isinstance(body, str):
            return body
        parts = [str(body[k]) for k in ("error", "msg", "detail") if body.get(k)]
        return ": ".join(parts) or response.reason_phrase

    def error_class(self, op: Op, status: int, detail: str) -> type[ProviderError] | None:
        if status < 400:  # an unexpected redirect or informational answer will not improve on retry
            return InvalidRequest
        if status in (400, 403) and _BILLING_WORDING.search(detail):
            return QuotaOrBilling
        if op is Op.SEARCH and status == 404:
            return QuotaOrBilling
        if op is Op.CREATE and (
            status in (403, 404, 410) or (status == 400 and _CAPACITY_WORDING.search(detail))
        ):
            return NoCapacity
        return None

    async def search_offers(self, query: dict[str, Any]) -> list[Any]:
        offers = await self.send_json(Op.SEARCH, "POST", "/api/v0/bundles", json=query, key="offers")
        if isinstance(offers, dict):  # the spec's own example shows a bare object for one offer
            return [offers]
        if not isinstance(offers, list):
            raise Transient("search: 'offers' is not a list", provider=self._provider)
        return offers

    async def create_instance(self, ask_id: int, body: dict[str, Any]) -> int:
        """Accept an ask; returns the new instance id (``new_contract``, not ``id``)."""
        result = await self.send_json(Op.CREATE, "PUT", f"/api/v0/asks/{ask_id}", json=body)
        if isinstance(result, dict) and result.get("success") is False:
            fake = httpx.Response(400, json=result)
            raise self.failure(Op.CREATE, response=fake)
        contract = self.field(Op.CREATE, result, "new_contract")
        if not isinstance(contract, int) or isinstance(contract, bool):
            raise Transient("create: 'new_contract' is not an integer", provider=self._provider)
        return contract

    async def show_instance(self, instance_id: str) -> Any:
        """One instance, or ``NotFound`` (the API answers ``{"instances": null}`` for unknown ids)."""
        instance = await self.send_json(Op.READ, "GET", f"/api/v0/instances/{instance_id}", key="instances")
        if instance is None:
            raise NotFound(f"instance {instance_id} not found", provider=self._provider)
        return instance

    async def list_instances(self, max_pages: int) -> list[Any]:
        """Every instance of the account, following ``next_token`` (25 per page)."""
        instances: list[Any] = []
        token: str | None = None
        for _ in range(max_pages):
            params = {"limit": "25"} if token is None else {"limit": "25", "after_token": token}
            body = await self.send_json(Op.READ, "GET", "/api/v1/instances", params=params)
            instances.extend(self.list_field(Op.READ, body, "instances"))
            token = body.get("next_token")
            if not token:
                return instances
        log.warning("provider %s: instance list truncated after %d pages", self._provider, max_pages)
        raise Transient(f"read: more than {max_pages} pages of instances", provider=self._provider)

    async def destroy_instance(self, instance_id: str) -> None:
        """Destroy (an instance already gone is ``NotFound``, which the adapter kit tolerates)."""
        await self.send_json(Op.DELETE, "DELETE", f"/api/v0/instances/{instance_id}")

    async def request_logs(self, instance_id: str, body: dict[str, Any]) -> str:
        url = await self.send_json(
            Op.LOGS, "PUT", f"/api/v0/instances/request_logs/{instance_id}", json=body, key="result_url"
        )
        if not isinstance(url, str) or not url.startswith("https://"):
            raise Transient("logs: 'result_url' is not an https URL", provider=self._provider)
        return url

    @asynccontextmanager
    async def log_snapshot(self, url: str) -> AsyncIterator[AsyncIterator[bytes] | None]:
        """The uploaded log file as a stream of chunks (read as the caller goes, over the
        log-stream pool, closed on exit), or ``None`` while it is not there yet. Sent WITHOUT the
        API key: the URL is a pre-signed object-storage address on another host."""
        async with self.stream(Op.LOGS, "GET", url, ok=frozenset({403, 404}), keyless=True) as response:
            if response.status_code in (403, 404):
                yield None
            else:
                yield self._chunks(response)

    async def _chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise self.failure(Op.LOGS, exc=exc) from None
