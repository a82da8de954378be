"""One offer refresh per provider for every virtual node that uses it.

Each node of ``vkprovider serve`` (``nodes:``) has its own :class:`~vkprovider.placement.Placer`
and so its own :class:`~vkprovider.placement.catalog.Catalog`; without this, nodes sharing a
provider would each fetch its offers on their own timer, multiplying a provider's catalog
calls by its nodes. With it, every catalog that lists a provider holds the same
:class:`~vkprovider.placement.catalog.ProviderCatalog` entry: the first catalog to list the
provider owns its refresh loop, any other catalog's refresh (``/explain?refresh=true``, a
start-up) joins the fetch in flight or starts one for all, and each outcome reaches every
listing node's health (``on_refresh``), so each node still judges its providers itself. Capacity
taken from an offer is taken from the one entry: two nodes do not both pick its last unit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from vkprovider.placement.catalog import Catalog, ProviderCatalog


class SharedOffers:
    """The process's provider catalog entries, their owners and listeners (one per process)."""

    def __init__(self) -> None:
        self.entries: dict[str, ProviderCatalog] = {}
        self._owners: dict[str, Catalog] = {}
        self._members: dict[str, list[Catalog]] = {}
        self._inflight: dict[str, asyncio.Future[bool]] = {}

    def join(self, name: str, catalog: Catalog) -> ProviderCatalog:
        """``catalog`` lists provider ``name``: the shared entry (the first to join owns it)."""
        if name not in self.entries:
            self.entries[name] = ProviderCatalog(name)
            self._owners[name] = catalog
        self._members.setdefault(name, []).append(catalog)
        return self.entries[name]

    def owns(self, catalog: Catalog, name: str) -> bool:
        """Whether ``catalog`` runs ``name``'s refresh loop."""
        return self._owners.get(name) is catalog

    def listeners(self, name: str) -> list[Callable[[str, bool, str | None], None]]:
        """Every listing catalog's outcome callback (each node's provider health)."""
        return [c.on_refresh for c in self._members.get(name, []) if c.on_refresh is not None]

    async def refresh(self, name: str) -> bool:
        """Refresh ``name`` once for everyone: join the fetch in flight, else start one. The
        fetch is shielded, so one caller's cancellation does not cancel it for the others."""
        fetch = self._inflight.get(name)
        if fetch is None:
            fetch = asyncio.ensure_future(self._owners[name].fetch(name, self.listeners(name)))
            self._inflight[name] = fetch
            fetch.add_done_callback(lambda _: self._inflight.pop(name, None))
        return await asyncio.shield(fetch)
