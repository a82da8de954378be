"""What every provider says about this node's deployments, from one ``list`` call per provider.

Polling costs one call per provider per interval whatever the number of pods (no per-pod
polling). Providers with the ``watch`` capability push each transition as it happens; for them
the full list is only a slow resync (``watch_resync``), and the normal poll interval returns
while their stream is broken. A failed list changes nothing: the last known status stands, so a
provider outage never flips a Running pod to Pending or Failed. A deployment that was known and
is absent from a *successful* list is marked missing, and a run of ``Unknown`` reports is timed
the same way (``unknown_since``); any healthy sighting (a list, a push, a ``get``) resets both.
The reconciler decides when missing means lost: continuously for ``pods.lost_grace_seconds``,
then confirmed by a direct ``get`` (one list that omits a deployment kills nothing).

Each provider is followed by its own supervised tasks: one provider's failure (a plugin in
restart backoff, a hung list) is that provider's alone and never stops the others.

A UID is expected on one provider. When a list shows it on a second one (an ambiguous create
that succeeded after all), the extra entry is kept in ``twins`` rather than dropped, so the
orphan collector can find it and delete it instead of letting it bill.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from vkprovider.errors import ProviderError
from vkprovider.models import DeploymentStatus, Phase
from vkprovider.plugins.api import Provider, SupportsWatch
from vkprovider.retry import Backoff
from vkprovider.tasks import supervise

log = logging.getLogger(__name__)


@dataclass
class Tracked:
    provider: str
    status: DeploymentStatus
    first_seen: float
    missing_since: float | None = None  #: first successful list that omitted it, since seen last
    #: first report of phase Unknown since the last healthy one (any other phase resets it)
    unknown_since: float | None = None
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
        watch_resync: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        watch_backoff: Backoff | None = None,
        on_status: Callable[[str, str, DeploymentStatus], None] | None = None,
    ) -> None:
        self._providers = providers
        self._on_status = on_status  #: every status recorded, from any source (placement feedback)
        self._node = node_name
        self._interval = interval
        self._resync = max(interval, watch_resync)
        self._on_change = on_change
        self._timeout = list_timeout
        self.clock = clock
        self.deployments: dict[str, Tracked] = {}  #: UID -> the deployment the pod is on
        self.twins: dict[str, dict[str, Tracked]] = {}  #: UID -> provider -> a second deployment
        self._unreachable: dict[str, float] = {}
        self._streaming: set[str] = set()  #: providers whose watch stream is open
        self._answered: set[str] = set()  #: providers whose list answered at least once (this term)
        self._wake: dict[str, asyncio.Event] = {}
        self._watch_backoff = watch_backoff
        self.polls = 0  #: provider list calls answered (one per provider per round)
        self.pushed = 0  #: statuses received from provider watches

    # ------------------------------------------------------------------ reading

    def get(self, uid: str) -> Tracked | None:
        return self.deployments.get(uid)

    def entries(self, uid: str | None = None) -> Iterator[tuple[str, Tracked]]:
        """Every (UID, deployment) known, twins included (a snapshot: safe to mutate while iterating)."""
        uids = [uid] if uid is not None else list({*self.deployments, *self.twins})
        for one in uids:
            primary = self.deployments.get(one)
            if primary is not None:
                yield one, primary
            for twin in list(self.twins.get(one, {}).values()):
                yield one, twin

    def unanswered(self) -> list[str]:
        """Providers whose list has not answered once yet: what they hold is not known here."""
        return sorted(name for name in self._providers if name not in self._answered)

    def unreachable_since(self, provider: str) -> float | None:
        """Monotonic time the provider's list started failing; None while it answers."""
        return self._unreachable.get(provider)

    def recheck(self, provider: str, reachable: bool | None = None) -> None:
        """List ``provider`` now: its probes say its reachability changed. With a watch open the
        list is only a slow resync, so without this a probe-detected outage (or recovery) would
        reach the pods only at the next resync."""
        if provider in self._providers:
            self._wake.setdefault(provider, asyncio.Event()).set()

    def _mark_unreachable(self, provider: str) -> None:
        if provider not in self._unreachable:
            self._unreachable[provider] = self.clock()
            self._notify_provider(provider)  # its pods show it (vkprovider.io/ProviderReachable)

    def _notify_provider(self, provider: str) -> None:
        """The provider's API went away or came back: every pod on it is looked at again."""
        for uid in [uid for uid, t in self.deployments.items() if t.provider == provider]:
            self._on_change(uid)

    # ------------------------------------------------------------------ writing

    def record(self, uid: str, provider: str, status: DeploymentStatus) -> None:
        """Record a status learned from a deploy/get call (between polls)."""
        now = self.clock()
        tracked = self.deployments.get(uid)
        if tracked is not None and tracked.provider != provider:
            # The pod is now on ``provider``; the old deployment may still exist (an ambiguous
            # create): keep it visible as a twin until a list shows it gone or it is deleted.
            self.twins.setdefault(uid, {})[tracked.provider] = tracked
            tracked = None
        if tracked is None:
            tracked = self._pop_twin(uid, provider) or Tracked(provider, status, now)
            self.deployments[uid] = tracked
        tracked.status = status
        tracked.recorded_at = now
        tracked.missing_since = None
        _note_unknown(tracked, status, now)
        tracked.ever_ran = tracked.ever_ran or status.phase.value in ("Running", "Succeeded")
        if self._on_status is not None:
            self._on_status(uid, provider, status)

    def prefer(self, uid: str, provider: str) -> bool:
        """Make the copy of ``uid`` on ``provider`` the primary (the current one becomes a twin).

        Which list arrives first after a restart says nothing about which copy is the pod's:
        the caller names it (the pod's placement annotation). False when ``provider`` holds no
        second copy (nothing changes)."""
        primary = self.deployments.get(uid)
        if primary is None or primary.provider == provider:
            return False
        chosen = self._pop_twin(uid, provider)
        if chosen is None:
            return False
        self.twins.setdefault(uid, {})[primary.provider] = primary
        self.deployments[uid] = chosen
        return True

    def forget(self, uid: str, provider: str | None = None) -> None:
        """Drop what is known of ``uid`` (on ``provider`` only, when given)."""
        if provider is None:
            self.deployments.pop(uid, None)
            self.twins.pop(uid, None)
            return
        primary = self.deployments.get(uid)
        if primary is not None and primary.provider == provider:
            del self.deployments[uid]
            promoted = self._pop_twin(uid, min(self.twins.get(uid) or [""]))
            if promoted is not None:
                self.deployments[uid] = promoted
        else:
            self._pop_twin(uid, provider)

    def _pop_twin(self, uid: str, provider: str) -> Tracked | None:
        others = self.twins.get(uid)
        if not others:
            return None
        twin = others.pop(provider, None)
        if not others:
            del self.twins[uid]
        return twin

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Poll every provider on its interval, and follow the watch of those that can push.

        Each provider's loops are supervised on their own: a crash restarts that provider's
        loop with backoff and leaves the others running."""
        async with asyncio.TaskGroup() as group:
            for name in self._providers:
                group.create_task(supervise(f"poll-{name}", partial(self._poll_loop, name)))
                provider = self._providers[name]
                if isinstance(provider, SupportsWatch):
                    group.create_task(supervise(f"watch-{name}", partial(self._follow, name, provider)))

    async def _poll_loop(self, name: str) -> None:
        """List on the poll interval; while the provider's watch is open (and its API answers)
        only every ``watch_resync``: the stream carries the news. A list is due at once when
        woken — a broken stream, or the node agent's probes saw the provider's reachability flip
        (``recheck``): a stream can stay open while the API fails, and an outage must still
        reach the pods (ProviderReachable) without a probe of our own per poll."""
        wake = self._wake.setdefault(name, asyncio.Event())
        while True:
            streaming = name in self._streaming and name not in self._unreachable
            try:
                async with asyncio.timeout(self._resync if streaming else self._interval):
                    await wake.wait()
            except TimeoutError:
                pass
            wake.clear()
            await self._poll(name)

    async def _follow(self, name: str, provider: SupportsWatch) -> None:
        """Apply pushed statuses; a broken stream is re-opened with backoff (the poll covers the gap)."""
        backoff = self._watch_backoff or Backoff(base=1.0, cap=30.0, jitter=0.5)
        capable: bool | None = None
        while True:
            try:
                if capable is None:
                    capable = (await self._providers[name].info()).capabilities.watch
                if not capable:
                    return
                self._streaming.add(name)
                async for status in provider.watch(self._node):
                    self.pushed += 1
                    self._apply_pushed(name, status)
                    backoff.reset()
                ended = "the stream closed"
            except ProviderError as exc:
                ended = str(exc)
            finally:
                if name in self._streaming:
                    self._streaming.discard(name)
                    self._wake.setdefault(name, asyncio.Event()).set()  # list now: the stream missed things
            delay = backoff.next()
            log.info(
                "watch of %s ended: %s; reopening in %.1fs", name, ended, delay, extra={"provider": name}
            )
            await asyncio.sleep(delay)

    def _apply_pushed(self, provider: str, status: DeploymentStatus) -> None:
        tracked = self.deployments.get(status.uid)
        if tracked is None:
            if status.phase.terminal or status.phase.value == "Unknown":
                return  # the end of something we already forgot (deleted): nothing to do
        elif tracked.provider != provider:
            if status.phase.terminal or status.phase.value == "Unknown":
                self._pop_twin(status.uid, provider)  # the second deployment ended: nothing to clean up
            else:
                self._twin_listed(status.uid, provider, status)
            return
        elif tracked.status == status and tracked.missing_since is None:
            return
        self.record(status.uid, provider, status)
        self._on_change(status.uid)

    async def poll_once(self) -> None:
        """List every provider once, concurrently (the initial sync of a term)."""
        asked = self.clock()
        await asyncio.gather(*(self._poll(name, asked) for name in self._providers))

    async def _poll(self, name: str, asked: float | None = None) -> None:
        asked = self.clock() if asked is None else asked  # before the call: what the list can know
        listed = await self._list(name)
        if listed is not None:
            self._apply(name, listed, asked)
        self.polls += 1

    async def _list(self, name: str) -> list[DeploymentStatus] | None:
        try:
            async with asyncio.timeout(self._timeout):
                listed = await self._providers[name].list(self._node)
        except (ProviderError, TimeoutError) as exc:
            self._mark_unreachable(name)
            log.warning("listing deployments on %s failed: %s", name, exc, extra={"provider": name})
            return None
        except Exception:  # an adapter bug: still that provider's alone, never the whole term's
            self._mark_unreachable(name)
            log.exception("listing deployments on %s crashed", name, extra={"provider": name})
            return None
        self._answered.add(name)
        if self._unreachable.pop(name, None) is not None:
            self._notify_provider(name)
        return listed

    def _apply(self, provider: str, listed: list[DeploymentStatus], asked: float) -> None:
        """Merge one provider's list, taken at ``asked``; news learned after that is kept."""
        seen: set[str] = set()
        for status in listed:
            uid = status.uid
            seen.add(uid)
            tracked = self.deployments.get(uid)
            if tracked is not None and tracked.provider != provider:
                self._twin_listed(uid, provider, status)
                continue
            if tracked is not None and tracked.recorded_at > asked:
                continue  # a deploy/get answered after this list was taken: it is fresher
            if tracked is not None and (tracked.status is status or tracked.status == status):
                if tracked.missing_since is not None:
                    tracked.missing_since = None
                    self._on_change(uid)
                continue
            self.record(uid, provider, status)
            self._on_change(uid)
        for uid, tracked in list(self.deployments.items()):
            if tracked.provider != provider or uid in seen or tracked.missing_since is not None:
                continue
            if tracked.recorded_at > asked:
                continue  # deployed after the list was taken, so the list cannot show it
            tracked.missing_since = self.clock()
            self._on_change(uid)
        for uid in [u for u, others in self.twins.items() if provider in others and u not in seen]:
            if self.twins[uid][provider].recorded_at <= asked:
                self._pop_twin(uid, provider)  # gone from that provider: nothing left to clean up

    def _twin_listed(self, uid: str, provider: str, status: DeploymentStatus) -> None:
        others = self.twins.setdefault(uid, {})
        twin = others.get(provider)
        if twin is None:
            primary = self.deployments[uid].provider
            log.warning(
                "pod %s is deployed on both %s and %s", uid, primary, provider, extra={"provider": provider}
            )
            others[provider] = Tracked(provider, status, self.clock())
        else:
            twin.status = status
            twin.missing_since = None


def _note_unknown(tracked: Tracked, status: DeploymentStatus, now: float) -> None:
    """Lost means *continuously* missing or Unknown for the grace: a run of Unknown reports
    starts the clock, any other phase (a healthy sighting) stops it."""
    if status.phase is Phase.UNKNOWN:
        if tracked.unknown_since is None:
            tracked.unknown_since = now
    else:
        tracked.unknown_since = None
