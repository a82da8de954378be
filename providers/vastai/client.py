"""HTTP calls to the Vast.ai REST API, and the one function that turns failures into error classes.

Shapes follow ``vastai.openapi.yaml`` (see docs/providers.md). Paths are written exactly as the
spec lists them (no trailing slash). Every call goes through ``_request`` so transport failures,
HTTP errors and undecodable bodies all end in ``map_error``.
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
    json_body,
    require_field,
    response_error,
    transport_error,
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


def _detail(response: httpx.Response) -> str:
    """``error: msg`` (or ``detail``) from a Vast.ai error body, or a clipped raw body."""
    body = error_body(response)
    if isinstance(body, str):
        return body
    parts = [str(body[k]) for k in ("error", "msg", "detail") if body.get(k)]
    return ": ".join(parts) or response.reason_phrase


def _vast_reading(op: Op, status: int, detail: str) -> type[ProviderError] | None:
    """Where Vast.ai departs from the shared status table (``None``: the table decides)."""
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


def map_error(
    provider: str, op: Op, *, response: httpx.Response | None = None, exc: Exception | None = None
) -> ProviderError:
    """The single mapping from a failed Vast.ai call to a provider error class.

    The shared table (``vkprovider.plugins.api.error_for_status``) with Vast.ai's own readings:

    * transport errors, timeouts, 5xx → ``Transient``; 429 → ``Transient`` honouring ``Retry-After``
    * 401, 402, and any 400/403 mentioning credit/balance → ``QuotaOrBilling`` (stop, alert)
    * 404 on offer search → ``QuotaOrBilling``: the spec documents it as "invalid or missing API key"
    * 404/410 on create (offer gone or taken) and 400/403 on create that read as an unavailable
      ask → ``NoCapacity``; other 400/403 on create (``invalid_args``, ``invalid_price``…) →
      ``InvalidRequest``
    * 404 on read/delete/logs → ``NotFound``; 403 elsewhere → ``QuotaOrBilling`` (key lacks access)
    * other 4xx (and an unexpected 1xx/3xx) → ``InvalidRequest``
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
        override=_vast_reading(op, response.status_code, detail),
    )


class VastClient(KeyedHttpClient[Op]):
    """Typed calls to the API over one pooled, key-authenticated client (see ``KeyedHttpClient``)."""

    def map_error(
        self, op: Op, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        return map_error(self._provider, op, response=response, exc=exc)

    async def _request(self, op: Op, method: str, path: str, **kwargs: Any) -> Any:
        """Send (failures mapped by ``send``) and return the decoded JSON body (``Transient`` if not JSON)."""
        response = await self.send(op, method, path, **kwargs)
        return json_body(response, op.value, provider=self._provider)

    def _field(self, op: Op, body: Any, key: str) -> Any:
        return require_field(body, key, op.value, provider=self._provider)

    async def search_offers(self, query: dict[str, Any]) -> list[Any]:
        body = await self._request(Op.SEARCH, "POST", "/api/v0/bundles", json=query)
        offers = self._field(Op.SEARCH, body, "offers")
        if isinstance(offers, dict):  # the spec's own example shows a bare object for one offer
            return [offers]
        if not isinstance(offers, list):
            raise Transient("search: 'offers' is not a list", provider=self._provider)
        return offers

    async def create_instance(self, ask_id: int, body: dict[str, Any]) -> int:
        """Accept an ask; returns the new instance id (``new_contract``, not ``id``)."""
        result = await self._request(Op.CREATE, "PUT", f"/api/v0/asks/{ask_id}", json=body)
        if isinstance(result, dict) and result.get("success") is False:
            fake = httpx.Response(400, json=result)
            raise self.failure(Op.CREATE, response=fake)
        contract = self._field(Op.CREATE, result, "new_contract")
        if not isinstance(contract, int) or isinstance(contract, bool):
            raise Transient("create: 'new_contract' is not an integer", provider=self._provider)
        return contract

    async def show_instance(self, instance_id: str) -> Any:
        """One instance, or ``NotFound`` (the API answers ``{"instances": null}`` for unknown ids)."""
        body = await self._request(Op.READ, "GET", f"/api/v0/instances/{instance_id}")
        instance = self._field(Op.READ, body, "instances")
        if instance is None:
            raise NotFound(f"instance {instance_id} not found", provider=self._provider)
        return instance

    async def list_instances(self, max_pages: int) -> list[Any]:
        """Every instance of the account, following ``next_token`` (25 per page)."""
        instances: list[Any] = []
        token: str | None = None
        for _ in range(max_pages):
            params = {"limit": "25"} if token is None else {"limit": "25", "after_token": token}
            body = await self._request(Op.READ, "GET", "/api/v1/instances", params=params)
            page = self._field(Op.READ, body, "instances")
            if not isinstance(page, list):
                raise Transient("read: 'instances' is not a list", provider=self._provider)
            instances.extend(page)
            token = body.get("next_token")
            if not token:
                return instances
        log.warning("provider %s: instance list truncated after %d pages", self._provider, max_pages)
        raise Transient(f"read: more than {max_pages} pages of instances", provider=self._provider)

    async def destroy_instance(self, instance_id: str) -> None:
        """Destroy; an instance that is already gone counts as destroyed."""
        try:
            await self._request(Op.DELETE, "DELETE", f"/api/v0/instances/{instance_id}")
        except NotFound:
            return

    async def request_logs(self, instance_id: str, body: dict[str, Any]) -> str:
        result = await self._request(
            Op.LOGS, "PUT", f"/api/v0/instances/request_logs/{instance_id}", json=body
        )
        url = self._field(Op.LOGS, result, "result_url")
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
