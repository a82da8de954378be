"""Provider probes: which providers are reachable? (DESIGN §4.2, like virtual-kubelet's ping.)

Every provider is probed concurrently with a timeout, so one hung provider cannot delay the
verdict on the others. Each result goes into the Placer's health (which drives scoring, the
circuit breaker and capacity) and into the node's ``ProvidersReachable`` condition. Unlike the
Go library, a failed ping never stops the Lease: the node stays Ready while vkprovider runs.

A provider's failure is logged once when it starts (WARNING, naming the error) and once when it
ends (INFO); the probes in between are silent, whatever the probe interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from vkprovider.node.conditions import Reachability
from vkprovider.placement.health import ProviderHealth
from vkprovider.plugins.api import Provider

log = logging.getLogger(__name__)


class Prober:
    def __init__(
        self, providers: Mapping[str, Provider], health: ProviderHealth, *, timeout: float = 5.0
    ) -> None:
        self._providers = dict(providers)
        self._health = health
        self._timeout = timeout
        #: provider name -> error text of its last probe ("" when it succeeded)
        self.errors: dict[str, str] = {}
        self.rounds = 0

    @property
    def backend_up(self) -> bool:
        """True once a round has run and at least one provider answered. With no providers
        there is no backend, so the node is not Ready."""
        return any(err == "" for err in self.errors.values())

    def reachability(self) -> Reachability:
        """The verdict per provider: unreachable once its last probe failed and placement counts
        it unreachable (every provider counts as reachable until then)."""
        names = sorted(self._providers)
        # Unreachable as placement sees it (placement.unreachable_after_failures probes/refreshes
        # failed in a row), not on one failed probe: the condition says what placement does.
        down = tuple(n for n in names if self.errors.get(n) and self._health.unreachable(n))
        return Reachability(
            reachable=tuple(n for n in names if n not in down),
            unreachable=down,
            errors=tuple((n, self.errors[n]) for n in down),
        )

    def down_message(self) -> str:
        """Why the backend is down, for the Ready condition's message."""
        if not self._providers:
            return "no providers configured"
        failures = "; ".join(f"{name}: {err}" for name, err in sorted(self.errors.items()) if err)
        return f"every provider's probe failed ({failures})"[:1024]

    async def probe_all(self) -> bool:
        """One round; returns ``backend_up``."""
        names = list(self._providers)
        results = await asyncio.gather(*(self._probe(n) for n in names))
        self.errors = dict(zip(names, results, strict=True))
        self.rounds += 1
        return self.backend_up

    async def _probe(self, name: str) -> str:
        try:
            async with asyncio.timeout(self._timeout):
                await self._providers[name].probe()
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            error = f"probe timed out after {self._timeout:g}s"
        except Exception as exc:  # any failure means unreachable; adapters should raise Transient
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            if self.errors.get(name):
                log.info("provider reachable again", extra={"provider": name})
            self._health.record_probe(name, True)
            return ""
        if not self.errors.get(name):
            log.warning("provider unreachable: probe failed", extra={"provider": name, "error": error})
        self._health.record_probe(name, False, error)
        return error
