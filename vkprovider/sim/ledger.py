"""Read the providers' billing ledgers (fakecloud ``GET /admin/ledger``): the report's money
comes from here, never from an estimate."""

from __future__ import annotations

import httpx

from vkprovider.sim.record import LedgerEntry


class LedgerUnavailable(RuntimeError):
    """A provider has no ledger endpoint (an older fakecloud) or did not answer."""


class LedgerReader:
    def __init__(self, urls: dict[str, str], *, timeout: float = 5.0) -> None:
        self.urls = urls  #: provider name -> fakecloud base URL
        self._client = httpx.AsyncClient(timeout=timeout)
        self.last: dict[str, list[LedgerEntry]] = {name: [] for name in urls}

    async def read(self, name: str) -> list[LedgerEntry]:
        try:
            resp = await self._client.get(f"{self.urls[name]}/admin/ledger")
        except httpx.HTTPError as exc:
            raise LedgerUnavailable(f"{name}: ledger not reachable: {exc}") from None
        if resp.status_code == 404:
            raise LedgerUnavailable(f"{name}: fakecloud has no /admin/ledger")
        resp.raise_for_status()
        entries = [LedgerEntry.from_wire(name, e) for e in resp.json()["entries"]]
        self.last[name] = entries
        return entries

    async def read_all(self, *, strict: bool = False) -> dict[str, list[LedgerEntry]]:
        """Every provider's entries; a provider that fails keeps its last reading unless ``strict``."""
        for name in self.urls:
            try:
                await self.read(name)
            except (LedgerUnavailable, httpx.HTTPStatusError):
                if strict:
                    raise
        return dict(self.last)

    async def close(self) -> None:
        await self._client.aclose()
