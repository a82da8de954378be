"""One virtual node of ``vkprovider serve``: what a process runs once per configured node.

A node (``node:``, or each item of ``nodes:``) owns its placement view (only its providers, so
their breaker, blocklist and outage condition are its own; the client-side rate limiters are
shared, so nodes on one provider keep its limit together, and so are the offer catalogs, so a
provider's offers are fetched once for all its nodes: ``placement.shared_offers``), its node agent, its pod controller,
the gate when one is configured, and its own leadership Lease (``vkprovider-<node name>``), so
replicas are active-active: each may lead some nodes, and a replica's loss moves only its nodes.
The API clients, the provider adapters and the admin HTTP server are the process's, shared.

A term is one leadership of this node's Lease; the pod controller starts each term from a fresh
list (``PodController.run``), so nothing of an earlier term is trusted.

:class:`LeadShare` spreads nodes across replicas: a replica that leads its share of the nodes
(nodes / ``leader_election.replicas``, rounded up) waits one lease duration before it tries to
take one more free Lease, so a replica below its share takes it first; with no such replica
(it failed) the node is still taken, one lease duration later.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from vkprovider.config import NodeConfig, Settings
from vkprovider.gate.claim import default_identity
from vkprovider.gate.config import GateConfig
from vkprovider.gate.loop import Gate
from vkprovider.kube.client import KubeClient
from vkprovider.kube.leader import LeaderElector
from vkprovider.node.agent import NodeAgent
from vkprovider.placement import Placer
from vkprovider.placement.ratelimit import RateLimiters
from vkprovider.placement.shared_offers import SharedOffers
from vkprovider.plugins.api import Provider
from vkprovider.pods.controller import PodController
from vkprovider.quota import term as quota_term
from vkprovider.retry import Sleep
from vkprovider.tasks import supervise


class LeadShare:
    """How many of this process's nodes it leads, and the slot each campaign attempt runs in."""

    def __init__(self, nodes: int, replicas: int, *, sleep: Sleep = asyncio.sleep) -> None:
        self.share = math.ceil(nodes / replicas)
        self.electors: list[LeaderElector] = []
        self._lock = asyncio.Lock()
        #: injected, not patched: a test replacing ``asyncio.sleep`` itself would replace it for
        #: every task on the shared event loop (a server task then spins and starves the test)
        self._sleep = sleep

    @property
    def wait_seconds(self) -> float:
        """One lease duration: a Lease another replica below its share wants is taken by then."""
        return max((elector.lease_duration for elector in self.electors), default=0.0)

    def leading(self) -> int:
        return sum(elector.is_leader for elector in self.electors)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Attempts run one at a time, so the count is exact when an attempt starts; at its
        share a replica waits ``wait_seconds`` first (once per attempt) for the others."""
        waited = False
        while True:
            async with self._lock:
                if waited or self.leading() < self.share:
                    yield
                    return
            await self._sleep(self.wait_seconds)
            waited = True


@dataclass
class ServedNode:
    """One configured node and everything that acts for it (see the module docstring)."""

    settings: Settings
    config: NodeConfig
    kube: KubeClient
    heartbeat: KubeClient
    #: this node's providers: ``config.providers`` of the process's adapters, or all of them
    providers: dict[str, Provider]
    placer: Placer
    node: NodeAgent
    controller: PodController
    gate: Gate | None = None
    #: the Kueue quota sync (``quota:``, one ClusterQueue writer) runs in the first node's terms
    runs_quota: bool = False
    elector: LeaderElector | None = field(default=None, init=False)

    @classmethod
    def build(
        cls,
        settings: Settings,
        config: NodeConfig,
        adapters: Mapping[str, Provider],
        kube: KubeClient,
        heartbeat: KubeClient,
        *,
        limiters: RateLimiters | None = None,
        offers: SharedOffers | None = None,
    ) -> ServedNode:
        s = settings
        providers = (
            {name: adapters[name] for name in config.providers} if config.providers else dict(adapters)
        )
        placer = Placer(providers, s.placement, limiters=limiters, offers=offers)
        gate = None
        if s.gate is not None:  # the capacity gate of this node (the same section for each)
            gate = Gate(kube, s.gate, config.name, identity=_gate_identity(s, config))
        controller = PodController(
            kube,
            providers,
            placer,
            node_name=config.name,
            host_ip=config.internal_ip,
            workers=s.pods.workers,
            status_poll_seconds=s.pods.status_poll_seconds,
            orphan_gc_seconds=s.pods.orphan_gc_seconds,
            lost_grace_seconds=s.pods.lost_grace_seconds,
            backoff_base_seconds=s.pods.backoff_base_seconds,
            backoff_max_seconds=s.pods.backoff_max_seconds,
            status_before_delete=s.pods.status_before_delete,
            traffic=s.traffic,
            zone=config.topology_zone(),
        )
        agent = NodeAgent(
            kube,
            config,
            providers,
            placer,
            pods=lambda: list(controller.informer.cache.values()),
            heartbeat=heartbeat,
            # the capacity gate's taint, removed once no gate renews its heartbeat (also for a
            # standalone gate, whose section may be absent here: then the defaults)
            gate_taint_key=(s.gate or GateConfig()).taint.key,
            gate_timeout_seconds=(s.gate or GateConfig()).signal_timeout_seconds,
        )
        runs_quota = s.quota is not None and config is s.node_list()[0]
        return cls(s, config, kube, heartbeat, providers, placer, agent, controller, gate, runs_quota)

    @property
    def name(self) -> str:
        return self.config.name

    async def preflight(self) -> None:
        """Catalogs first (capacity for the Node), then what must stop start-up if misconfigured."""
        await self.placer.refresh()
        if self.gate is not None:  # refuse bad selectors/queries at start-up
            await self.gate.preflight()

    async def run(self, share: LeadShare | None = None) -> None:
        """The offer catalog, and this node's terms: under its own Lease, or for good."""
        async with asyncio.TaskGroup() as group:
            group.create_task(supervise(f"offer-catalog {self.name}", self.placer.run))
            # Supervised: no failure of an election (or of a term) ends the service.
            group.create_task(supervise(f"leader-election {self.name}", lambda: self._lead_or_follow(share)))

    async def _lead_or_follow(self, share: LeadShare | None) -> None:
        election = self.settings.leader_election
        if not election.enabled:
            await self.act()
            return
        if self.elector is None:
            self.elector = LeaderElector(
                self.heartbeat,
                election.namespace,
                _lease_name(self.settings, self.config),
                election.identity,
                campaign_slot=share.slot if share is not None else None,
            )
            if share is not None:
                share.electors.append(self.elector)
            self.controller.elector = self.elector  # /readyz tells a standby from a leader
        await self.elector.run(self.act)

    async def act(self) -> None:
        """One leadership term (or the whole run without election); may run again later."""
        # Registration retries on its own: one API error must not end the term (or the process).
        await supervise(f"node-register {self.name}", self.node.register)
        async with asyncio.TaskGroup() as group:
            group.create_task(supervise(f"node-agent {self.name}", self.node.run))
            group.create_task(supervise(f"pod-controller {self.name}", self.controller.run))
            if self.gate is not None:  # gate: only the node's leader writes its taint
                group.create_task(supervise(f"gate {self.name}", self.gate.run))
            if self.runs_quota:  # quota sync: only the first node's leader writes the ClusterQueue
                group.create_task(supervise("quota-sync", self._quota_term))

    async def _quota_term(self) -> None:
        assert self.settings.quota is not None
        await quota_term.run_term(self.kube, self.settings.quota, self.name)


def build_nodes(
    settings: Settings, adapters: Mapping[str, Provider], kube: KubeClient, heartbeat: KubeClient
) -> list[ServedNode]:
    """One unit per configured node; their placers share the client-side rate limiters, so
    nodes sharing a provider keep its limit together, and the offer catalogs, so its offers are
    fetched once (the rest of placement is per node)."""
    nodes: list[ServedNode] = []
    offers = SharedOffers()
    for config in settings.node_list():
        limiters = nodes[0].placer.limiters if nodes else None
        nodes.append(
            ServedNode.build(settings, config, adapters, kube, heartbeat, limiters=limiters, offers=offers)
        )
    return nodes


def _lease_name(settings: Settings, config: NodeConfig) -> str:
    return settings.leader_election.lease_name or f"vkprovider-{config.name}"


def _gate_identity(settings: Settings, config: NodeConfig) -> str:
    """Who owns the gate taint: the leader-election Lease (any leader of it is the same
    owner, so a failover takes over at once), else this host's ``serve``."""
    if settings.leader_election.enabled:
        return f"lease:{settings.leader_election.namespace}/{_lease_name(settings, config)}"
    return default_identity("serve")


def lead_share(settings: Settings, nodes: Sequence[ServedNode]) -> LeadShare | None:
    """The spread across replicas, when there is something to spread."""
    election = settings.leader_election
    if not election.enabled or len(nodes) < 2 or election.replicas < 2:
        return None
    return LeadShare(len(nodes), election.replicas)
