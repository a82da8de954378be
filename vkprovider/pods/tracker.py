"""What every provider says about this node's deployments, from one ``list`` call per provider.

Polling costs one call per provider per interval whatever the number of pods (no per-pod
polling). Providers with the ``watch`` capability also push each transition as it happens; the
poll stays as the safety net that finds what a broken stream missed. A failed list changes
nothing: the last known status stands, so a provider outage never flips a Running pod to
Pending or Failed. A deployment that was known and is absent from a *successful* list is marked
missing; the reconciler decides when missing means lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vkprovider.errors import ProviderError
from vkprovider.models import DeploymentStatus
from vkprovider.plugins.api import Provider, SupportsWatch

log = logging.getLogger(__name__)


@dataclass
class Tracked:
    provider: str
    status: DeploymentStatus
    first_seen: float
    missing_since: float | None = None
    ever_ran: bool = False
    recorded_at: float = 0.0  #: when deploy/get last told us about it (a list older than this is stale)


class DeploymentTracker:
    def __init__(
        self,
        providers: Mapping[str, Provider],
        node_name: str,
        *,
        interval: float,
        on_change: Callable[[str], None],
        list_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._providers = providers
        self._node = node_name
        self._interval = interval
        self._on_change = on_change
        self._timeout = list_timeout
        self.clock = clock
        self.deployments: dict[str, Tracked] = {}
        self.listed = asyncio.Event()
        self.last_list_ok: dict[str, bool] = {}
        self.polls = 0
        self.pushed = 0  #: statuses received from provider watches
        self._watch_backoff = (1.0, 30.0)
        self._unreachable: dict[str, float] = {}

    def unreachable_since(self, provider: str) -> float | None:
        """Since when (``clock``) listing ``provider`` fails, or None while its API answers."""
        return self._unreachable.get(provider)

    def _notify_provider(self, provider: str) -> None:
        """The provider's API went away or came back: every pod on it is looked at again."""
        for uid in [uid for uid, t in self.deployments.items() if t.provider == provider]:
            self._on_change(uid)

    def get(self, uid: str) -> Tracked | None:
        return self.deployments.get(uid)

    def record(self, uid: str, provider: str, status: DeploymentStatus) -> None:
        """Record a status learned from a deploy/get call (between polls)."""
        now = self.clock()
        tracked = self.deployments.get(uid)
        if tracked is None or tracked.provider != provider:
            tracked = Tracked(provider, status, now)
            self.deployments[uid] = tracked
        tracked.status = status
        tracked.recorded_at = now
        tracked.missing_since = None
        tracked.ever_ran = tracked.ever_ran or status.phase.value in ("Running", "Succeeded")

    def forget(self, uid: str) -> None:
        self.deployments.pop(uid, None)

    async def run(self) -> None:
        """Poll every provider on the interval, and follow the watch of those that can push."""
        async with asyncio.TaskGroup() as group:
            for name, provider in self._providers.items():
                if isinstance(provider, SupportsWatch) and (await provider.info()).capabilities.watch:
                    group.create_task(self._follow(name, provider), name=f"watch-{name}")
            while True:
                await asyncio.sleep(self._interval)
                await self.poll_once()

    async def _follow(self, name: str, provider: SupportsWatch) -> None:
        """Apply pushed statuses; a broken stream is re-opened with backoff (the poll covers the gap)."""
        delay, ceiling = self._watch_backoff
        while True:
            try:
                async for status in provider.watch(self._node):
                    self.pushed += 1
                    self._apply_pushed(name, status)
                    delay = self._watch_backoff[0]
            except ProviderError as exc:
                log.info(
                    "watch of %s ended: %s; reopening in %.0fs", name, exc, delay, extra={"provider": name}
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, ceiling)

    def _apply_pushed(self, provider: str, status: DeploymentStatus) -> None:
        tracked = self.deployments.get(status.uid)
        if tracked is None:
            if status.phase.terminal or status.phase.value == "Unknown":
                return  # the end of something we already forgot (deleted): nothing to do
        elif tracked.provider != provider or (tracked.status == status and tracked.missing_since is None):
            return
        self.record(status.uid, provider, status)
        self._on_change(status.uid)

    async def poll_once(self) -> None:
        names = list(self._providers)
        asked = self.clock()
        results = await asyncio.gather(*(self._list(name) for name in names))
        for name, listed in zip(names, results, strict=True):
            self.last_list_ok[name] = listed is not None
            if listed is None:
                if name not in self._unreachable:
                    self._unreachable[name] = asked
                    self._notify_provider(name)  # its pods show it (vkprovider.io/ProviderReachable)
            elif self._unreachable.pop(name, None) is not None:
                self._notify_provider(name)
            if listed is not None:
                self._apply(name, listed, asked)
        self.polls += 1
        self.listed.set()

    async def _list(self, name: str) -> list[DeploymentStatus] | None:
        try:
            async with asyncio.timeout(self._timeout):
                return await self._providers[name].list(self._node)
        except (ProviderError, TimeoutError) as exc:
            log.warning("listing deployments on %s failed: %s", name, exc, extra={"provider": name})
            return None

    def _apply(self, provider: str, listed: list[DeploymentStatus], asked: float) -> None:
        """Merge one provider's list, taken at ``asked``; news learned after that is kept."""
        seen: set[str] = set()
        for status in listed:
            uid = status.uid
            seen.add(uid)
            tracked = self.deployments.get(uid)
            if tracked is not None and tracked.recorded_at > asked:
                continue  # a deploy/get answered after this list was taken: it is fresher
            if tracked is not None and tracked.provider == provider and tracked.status == status:
                if tracked.missing_since is not None:
                    tracked.missing_since = None
                    self._on_change(uid)
                continue
            if tracked is not None and tracked.provider != provider:
                log.warning("pod %s is deployed on both %s and %s", uid, tracked.provider, provider)
                continue
            self.record(uid, provider, status)
            self._on_change(uid)
        for uid, tracked in self.deployments.items():
            if tracked.provider != provider or uid in seen or tracked.missing_since is not None:
                continue
            if tracked.recorded_at > asked:
                continue  # deployed after the list was taken, so the list cannot show it
            tracked.missing_since = self.clock()
            self._on_change(uid)
