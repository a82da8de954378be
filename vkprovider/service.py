"""``vkprovider serve``: compose the virtual nodes (``vkprovider.served_node``: each its node
agent, pod controller, placement view and Lease), the admin HTTP server and the kubelet API.

Start-up order matters: the config has passed its start-up checks (``vkprovider.cli.serve``);
the API server is waited for with backoff (a restarting cluster is not a crash); providers and
the offer catalog next (capacity for the Node; a provider that is down is just probed), then the
Node and its Lease, then the pod controller (which waits for its caches). Shutdown on SIGTERM
drains the pod queue for ``pods.drain_timeout_seconds``, then cancels the loops and closes the
providers and the API client. Every long-running loop is supervised.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import ssl
import tempfile
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vkprovider.config import Settings
from vkprovider.errors import ConfigError
from vkprovider.gate.loop import Gate
from vkprovider.http.admin import create_admin_app
from vkprovider.http.auth import Authenticator, is_loopback_bind
from vkprovider.http.kubelet import create_kubelet_app, server_tls
from vkprovider.http.kubelet_cert import keep_renewed, serving_pair
from vkprovider.http.log_caps import LogStreamCaps
from vkprovider.http.pacing import RefusalPacer
from vkprovider.http.reviews import ReviewBudget
from vkprovider.http.server import AsgiServer
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeForbidden, KubeUnavailable
from vkprovider.node.agent import NodeAgent
from vkprovider.placement import Placer
from vkprovider.plugins.api import Provider
from vkprovider.plugins.registry import build_providers
from vkprovider.pods.controller import PodController
from vkprovider.quota import term as quota_term
from vkprovider.retry import retrying
from vkprovider.served_node import ServedNode, build_nodes, lead_share
from vkprovider.tasks import supervise

log = logging.getLogger(__name__)

#: connections of the heartbeat client (a Lease renewal, a status write, the election Lease)
HEARTBEAT_POOL = 4
#: connections of the review client (its limiter, ``kubelet.review_qps``, paces them)
REVIEW_POOL = 16


@dataclass
class Service:
    settings: Settings
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    providers: dict[str, Provider] = field(default_factory=dict)
    placer: Placer | None = None
    controller: PodController | None = None
    node: NodeAgent | None = None
    admin: AsgiServer | None = None
    #: the first node's kubelet API server (``kubelets``: every node's, by node name)
    kubelet: AsgiServer | None = None
    kubelets: dict[str, AsgiServer] = field(default_factory=dict)
    kube: KubeClient | None = None
    #: the heartbeat client: node Lease, node status, leader-election Lease (own pool, unthrottled)
    heartbeat: KubeClient | None = None
    #: TokenReviews and SubjectAccessReviews: own pool and limiter (``kubelet.review_qps``)
    reviewer: KubeClient | None = None
    reviews: ReviewBudget | None = None
    #: one per process: refusals to a peer are paced across the kubelet and the admin API
    refusals: RefusalPacer = field(default_factory=RefusalPacer)
    gate: Gate | None = None
    #: one per configured node (``vkprovider.served_node``); the fields above are the first's
    units: list[ServedNode] = field(default_factory=list)

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)

    async def run(self) -> None:
        s = self.settings
        self.providers = build_providers(s.providers)
        self.kube = await KubeClient.connect(s.kube.kubeconfig, qps=s.kube.qps, burst=s.kube.burst)
        # As the kubelet's heartbeat client: the Lease and node status never queue behind pod
        # traffic or reviews; reviews (anyone can make us send one) never queue pod traffic.
        self.heartbeat = self.kube.sibling(pool=HEARTBEAT_POOL)
        self.reviewer = self.kube.sibling(
            pool=REVIEW_POOL, qps=s.kubelet.review_qps, burst=s.kubelet.review_burst
        )
        self.reviews = ReviewBudget(s.kubelet.reviews_in_flight)
        try:
            if not await self._until_stopping(self._wait_for_apiserver()):
                return
            # One unit per configured node (``nodes:``, or the one ``node:``), each with its own
            # placement view, agent, controller and Lease; ``placer``/``node``/``controller``/
            # ``gate`` are the first's (the admin API's top level, the kubelet API: one node).
            self.units = build_nodes(s, self.providers, self.kube, self.heartbeat)
            # together: nodes sharing a provider join one catalog fetch (placement.shared_offers)
            await asyncio.gather(*(unit.preflight() for unit in self.units))
            first = self.units[0]
            self.placer, self.node, self.controller, self.gate = (
                first.placer,
                first.node,
                first.controller,
                first.gate,
            )
            if s.quota is not None:  # the Kueue quota sync: a missing ClusterQueue/flavor stops here
                await quota_term.preflight(self.kube, s.quota)
            try:
                admin_auth = None if is_loopback_bind(s.http.admin_host) else self._authenticator()
                admin_tls = (
                    server_tls(s.http.tls_cert_file, s.http.tls_key_file, None)
                    if s.http.tls_cert_file and s.http.tls_key_file
                    else None
                )
                self.admin = AsgiServer(
                    create_admin_app(
                        self.placer,
                        self.controller,
                        self.node,
                        gate=self.gate,
                        auth=admin_auth,
                        others=[(u.placer, u.controller, u.node, u.gate) for u in self.units[1:]],
                    ),
                    s.http.admin_host,
                    s.http.admin_port,
                    ssl_context=admin_tls,
                    limits=s.http.limits,
                )
            except OSError as exc:  # taken since the start-up check: still a config problem
                raise ConfigError(
                    f"http.admin_port: {s.http.admin_host}:{s.http.admin_port}: {exc}"
                ) from None
            await self.admin.start()
            log.info("admin API on %s%s", self.admin.url, " (authenticated views)" if admin_auth else "")
            if admin_auth is not None and admin_tls is None:
                log.warning(
                    "admin API on %s without TLS: bearer tokens from other hosts are refused (they would "
                    "travel in clear text); set http.tls_cert_file and http.tls_key_file to accept them",
                    s.http.admin_host,
                )
            await self._start_kubelet_api()
            async with asyncio.TaskGroup() as group:
                share = lead_share(s, self.units)
                # Each unit supervises its own loops: no failure of one node's term ends another's.
                loops = [group.create_task(unit.run(share)) for unit in self.units]
                if s.kubelet.csr:
                    loops += [
                        group.create_task(
                            supervise(
                                f"kubelet-serving-cert {u.name}", functools.partial(self._kubelet_via_csr, u)
                            )
                        )
                        for u in self.units
                    ]
                await self.stopping.wait()
                log.info("shutting down: draining the pod queue for %.0fs", s.pods.drain_timeout_seconds)
                await asyncio.gather(*(u.controller.drain(s.pods.drain_timeout_seconds) for u in self.units))
                for task in loops:
                    task.cancel()
        finally:
            await self._close()

    def _authenticator(self, *, anonymous: bool = False, node_name: str | None = None) -> Authenticator:
        """Reviews for the kubelet API (anonymous only if configured) and the admin API (never);
        authorized against ``nodes/<node>/proxy`` of ``node_name`` (default: the first node)."""
        k = self.settings.kubelet
        return Authenticator(
            self.reviewer,
            node_name or self.settings.node.name,
            anonymous=anonymous,
            token_ttl=k.token_cache_seconds,
            allowed_ttl=k.authorized_cache_seconds,
            denied_ttl=k.unauthorized_cache_seconds,
            budget=self.reviews,
            pacer=self.refusals,
        )

    async def _start_kubelet_api(self) -> None:
        """Each node's kubelet API on the address it advertises, if serving cert files are set
        (with ``kubelet.csr`` each starts once its CSR is issued: ``_kubelet_via_csr``)."""
        s = self.settings
        if not s.kubelet.enabled:
            log.info("kubelet API off (set kubelet.tls_cert_file and kubelet.tls_key_file, or kubelet.csr)")
            return
        if not s.kubelet.client_ca_file:
            log.warning(
                "kubelet API without kubelet.client_ca_file: client certificates are not verified, so the "
                "apiserver's kubelet client is refused unless it sends a bearer token, and every caller "
                "costs a TokenReview; set kubelet.client_ca_file to the CA of the apiserver's kubelet client"
            )
        if s.kubelet.tls_cert_file and s.kubelet.tls_key_file:
            tls = server_tls(s.kubelet.tls_cert_file, s.kubelet.tls_key_file, s.kubelet.client_ca_file)
            for unit in self.units:
                await self._serve_kubelet(unit, tls)

    async def _serve_kubelet(self, unit: ServedNode, tls: ssl.SSLContext) -> None:
        s = self.settings
        host, port = s.kubelet.bind_host or unit.config.internal_ip, unit.config.kubelet_port
        where = "node" if not s.nodes else f"nodes.{self.units.index(unit)}"
        try:
            server = AsgiServer(
                create_kubelet_app(
                    unit.controller,
                    self._authenticator(anonymous=s.kubelet.anonymous, node_name=unit.name),
                    LogStreamCaps(**s.kubelet.logs.model_dump()),
                ),
                host,
                port,
                ssl_context=tls,
                limits=s.kubelet.limits,
            )
        except OSError as exc:
            raise ConfigError(f"{where}.kubelet_port: {host}:{port}: {exc}") from None
        await server.start()
        self.kubelets[unit.name] = server
        if unit is self.units[0]:
            self.kubelet = server
        log.info("kubelet API of %s on %s", unit.name, server.url)

    async def _kubelet_via_csr(self, unit: ServedNode) -> None:
        """Obtain the node's serving cert through a CSR (or reuse a valid one in ``cert_dir``,
        one subdirectory per node with several nodes), serve, and keep it renewed (supervised)."""
        s = self.settings
        assert self.kube is not None
        directory = Path(s.kubelet.cert_dir or tempfile.mkdtemp(prefix="vkprovider-kubelet-"))
        if len(self.units) > 1:
            directory = directory / unit.name
            directory.mkdir(parents=True, exist_ok=True)
        addresses = [unit.config.internal_ip]
        pair = await serving_pair(self.kube, unit.name, addresses, directory)
        tls = server_tls(str(pair.cert), str(pair.key), s.kubelet.client_ca_file)
        if unit.name not in self.kubelets:
            await self._serve_kubelet(unit, tls)
        await keep_renewed(self.kube, unit.name, addresses, directory, pair, tls)

    async def _wait_for_apiserver(self) -> None:
        """An API server that is not up yet (a restarting cluster) is waited for with backoff,
        one log line per attempt; credentials it refuses are a config error, not a retry."""
        assert self.kube is not None
        where = self.settings.kube.kubeconfig or "in-cluster config"
        retry = retrying(
            base=1.0,
            cap=30.0,
            retry_on=(KubeUnavailable,),
            logger=log,
            what=f"reaching the API server ({where})",
        )
        try:
            async for attempt in retry:
                with attempt:
                    await self.kube.request("GET", "/version", timeout=10.0)
        except KubeForbidden as exc:
            raise ConfigError(
                f"kube.kubeconfig: the API server refused the credentials of {where}: {exc}"
            ) from None
        log.info("API server reachable (%s)", where)

    async def _until_stopping(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run ``work`` unless SIGTERM comes first; False if it was cut short."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            log.info("stopped before start-up finished")
            return False
        task.result()
        return True

    async def _close(self) -> None:
        for server in self.kubelets.values():
            await server.stop()
        if self.admin is not None:
            await self.admin.stop()
        for provider in self.providers.values():
            with contextlib.suppress(Exception):
                await provider.close()
        for kube in (self.kube, self.heartbeat, self.reviewer):
            if kube is not None:
                with contextlib.suppress(Exception):
                    await kube.close()
