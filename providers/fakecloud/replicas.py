"""The simulated deployments answer: each running deployment's TCP container ports serve HTTP at
its address, inside the network namespace ``serve_netns`` (the dev cluster's backends
namespace), so a Service endpoint fakecloud reports through ``/endpoints`` carries real requests.

A deployment listens from the moment it runs (after ``provisioning_seconds``, when it also gets
its address) until it ends or is deleted; a loop compares the store with the open listeners every
tenth of a second (status is a function of the clock, nothing announces a change). Each answer
names the provider and the deployment and comes after the ``round_trip_seconds`` knob, the
provider's extra round trip. Sockets in the namespace come from
``vkprovider.devcluster.netns_socket``; the namespace's address range must be local there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from .deployment import Deployment
from .lifecycle import ending
from .state import Store

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1
Key = tuple[str, int]


def serving(store: Store) -> dict[Key, Deployment]:
    """``(address, port) → deployment`` for every deployment running now."""
    now = store.clock()
    found: dict[Key, Deployment] = {}
    for d in store.deployments.values():
        started = d.created + store.config.lifecycle.provisioning_seconds
        if started > now or ending(d, store.config, now) is not None:
            continue
        for container in d.request.containers:
            for port in container.ports:
                if port.protocol == "TCP":
                    found[(d.ip, port.container_port)] = d
    return found


class ReplicaServers:
    """Started by the fakecloud server when its config names ``serve_netns``."""

    def __init__(self, store: Store, netns: str) -> None:
        from vkprovider.devcluster.netns_socket import NetnsSockets  # only where the namespace is

        self._store = store
        self._sockets = NetnsSockets(netns)
        self.servers: dict[Key, tuple[str, asyncio.Server]] = {}
        self._failed: set[Key] = set()  #: warned about once

    async def run(self) -> None:
        try:
            while True:
                await self.reconcile()
                await asyncio.sleep(POLL_SECONDS)
        finally:
            self.close()

    async def reconcile(self) -> None:
        from vkprovider.devcluster.replica_http import serve

        want = serving(self._store)
        for key in [k for k, (uid, _) in self.servers.items() if k not in want or want[k].uid != uid]:
            self.servers.pop(key)[1].close()
        for key, deployment in want.items():
            if key in self.servers:
                continue
            try:
                sock = await self._sockets.listener(*key)
            except OSError as exc:
                if key not in self._failed:
                    self._failed.add(key)
                    log.warning("%s: cannot serve %s:%d: %s", deployment.provider_id, *key, exc)
                continue
            server = await serve(sock, self._answer(deployment))
            self.servers[key] = (deployment.uid, server)

    def _answer(self, deployment: Deployment) -> Any:
        body = {
            "where": "external",
            "provider": self._store.config.provider,
            "deployment": deployment.provider_id,
            "pod_uid": deployment.uid,
        }

        async def answer() -> dict[str, Any]:
            delay = self._store.knobs.round_trip_seconds
            if delay > 0:
                await asyncio.sleep(delay)
            return body

        return answer

    def close(self) -> None:
        for _, server in self.servers.values():
            server.close()
        self.servers.clear()
        self._sockets.close()


@contextlib.asynccontextmanager
async def replica_servers(store: Store) -> AsyncIterator[ReplicaServers | None]:
    """Run :class:`ReplicaServers` for the block when the config names a namespace."""
    netns = store.config.serve_netns
    if not netns:
        yield None
        return
    servers = ReplicaServers(store, netns)
    task = asyncio.create_task(servers.run(), name="fakecloud-replicas")
    try:
        yield servers
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
