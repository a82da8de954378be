"""``vkprovider serve``: compose the node agent, pod controller, placement and admin HTTP.

Start-up order matters: providers and the offer catalog first (capacity for the Node), then the
Node and its Lease, then the pod controller (which waits for its caches). Shutdown on SIGTERM
drains the pod queue for ``pods.drain_timeout_seconds``, then cancels the loops and closes the
providers and the API client. Every long-running loop is supervised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass, field

from vkprovider.config import Settings
from vkprovider.http.admin import create_admin_app
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient
from vkprovider.kube.leader import LeaderElector
from vkprovider.node.agent import NodeAgent
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.plugins.registry import build_providers
from vkprovider.pods.controller import PodController
from vkprovider.tasks import supervise

log = logging.getLogger(__name__)


@dataclass
class Service:
    settings: Settings
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    providers: dict[str, Provider] = field(default_factory=dict)
    placer: Placer | None = None
    controller: PodController | None = None
    node: NodeAgent | None = None
    admin: AsgiServer | None = None
    kube: KubeClient | None = None

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)

    async def run(self) -> None:
        s = self.settings
        self.providers = build_providers(s.providers)
        self.kube = await KubeClient.connect(s.kube.kubeconfig, qps=s.kube.qps, burst=s.kube.burst)
        try:
            self.placer = Placer(self.providers, s.placement)
            await self.placer.refresh()
            self.node = NodeAgent(self.kube, s.node, self.providers, self.placer)
            self.controller = PodController(
                self.kube,
                self.providers,
                self.placer,
                node_name=s.node.name,
                host_ip=s.node.internal_ip,
                workers=s.pods.workers,
                status_poll_seconds=s.pods.status_poll_seconds,
                orphan_gc_seconds=s.pods.orphan_gc_seconds,
                lost_grace_seconds=s.pods.lost_grace_seconds,
                backoff_base_seconds=s.pods.backoff_base_seconds,
                backoff_max_seconds=s.pods.backoff_max_seconds,
            )
            self.admin = AsgiServer(
                create_admin_app(self.placer, self.controller, self.node),
                s.http.admin_host,
                s.http.admin_port,
            )
            await self.admin.start()
            log.info("admin API on %s", self.admin.url)
            async with asyncio.TaskGroup() as group:
                loops = [
                    group.create_task(supervise("offer-catalog", self.placer.run)),
                    group.create_task(self._lead_or_follow()),
                ]
                await self.stopping.wait()
                log.info("shutting down: draining the pod queue for %.0fs", s.pods.drain_timeout_seconds)
                await self.controller.drain(s.pods.drain_timeout_seconds)
                for task in loops:
                    task.cancel()
        finally:
            await self._close()

    async def _lead_or_follow(self) -> None:
        s = self.settings
        if not s.leader_election.enabled:
            await self._act()
            return
        assert self.kube is not None
        elector = LeaderElector(
            self.kube,
            s.leader_election.namespace,
            s.leader_election.lease_name or f"vkprovider-{s.node.name}",
            s.leader_election.identity,
        )
        if self.controller is not None:
            self.controller.elector = elector  # /readyz tells a standby from a leader
        await elector.run(self._act)

    async def _act(self) -> None:
        """One leadership term (or the whole run without election). Everything here may run
        again in a later term: the controller starts each term from a fresh list."""
        assert self.node is not None and self.controller is not None
        # Registration retries on its own: one API error must not end the term (or the process).
        await supervise("node-register", self.node.register)
        async with asyncio.TaskGroup() as group:
            group.create_task(supervise("node-agent", self.node.run))
            group.create_task(supervise("pod-controller", self.controller.run))

    async def _close(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
        for provider in self.providers.values():
            with contextlib.suppress(Exception):
                await provider.close()
        if self.kube is not None:
            await self.kube.close()
