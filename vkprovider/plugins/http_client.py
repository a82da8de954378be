"""A pooled HTTP client for adapters of clouds with an API key.

Every failure of a call (transport error or non-success status) goes through the subclass's
``map_error`` exactly once and is scrubbed of the API key, so an adapter's callers only ever see
provider error classes and never the key. ``transport`` is injectable, as in httpx, for tests.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import httpx

from vkprovider.errors import ProviderError
from vkprovider.plugins.apikey import ApiKeySource, BearerAuth

OpT = TypeVar("OpT")


class KeyedHttpClient(Generic[OpT]):
    def __init__(
        self,
        provider: str,
        *,
        base_url: str,
        key: ApiKeySource,
        timeout: float,
        max_connections: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._provider = provider
        self._key = key
        self._http = httpx.AsyncClient(
            base_url=base_url,
            auth=BearerAuth(key),
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections),
            headers={"Accept": "application/json"},
            transport=transport,
        )

    def map_error(
        self, op: OpT, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        """The adapter's single reading of a failed call (``op`` says what was attempted)."""
        raise NotImplementedError

    def failure(
        self, op: OpT, *, response: httpx.Response | None = None, exc: Exception | None = None
    ) -> ProviderError:
        """``map_error``, with the API key scrubbed from the message."""
        return self._key.scrubbed(self.map_error(op, response=response, exc=exc))

    async def send(self, op: OpT, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; returns a successful response or raises the mapped error."""
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self.failure(op, exc=exc) from None
        if response.is_success:
            return response
        raise self.failure(op, response=response)

    async def close(self) -> None:
        await self._http.aclose()
