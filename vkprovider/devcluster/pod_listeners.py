"""Local replicas that answer: an HTTP listener at each Ready kwok pod's IP, for as long as it is.

kwok makes pods Running and Ready without running anything, so a Service over them would route
to addresses where nothing listens. Here a pod informer keeps one listener per (pod IP,
declared TCP container port) for each pod with an IP from kwok's range, in the backends
namespace (:mod:`datapath`: the pod range is local there, so any pod IP can be bound), while
the pod is Ready and not terminating;
it is closed when the pod stops being Ready, starts terminating or goes away, so a connection
to a gone pod is refused as on a real node. A pod annotated to serve through its grace period
(``kwok.SERVE_THROUGH_GRACE_ANNOTATION``, a server with a preStop sleep) keeps answering while
it terminates, until kwok deletes it at the end of its grace: its endpoint, terminating but
serving, is what kube-proxy falls back to while no Ready one exists. Each answer names the pod
and says ``local``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any

from vkprovider.devcluster.datapath import POD_CIDR
from vkprovider.devcluster.kwok import SERVE_THROUGH_GRACE_ANNOTATION
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import serve
from vkprovider.kube.client import KubeClient
from vkprovider.kube.informer import Informer

log = logging.getLogger(__name__)

JSON = dict[str, Any]
Key = tuple[str, int]  #: (pod IP, port)
_POD_NETWORK = ipaddress.IPv4Network(POD_CIDR)


def _ready(pod: JSON) -> bool:
    """Ready and not terminating — or terminating while it serves through its grace
    (:data:`SERVE_THROUGH_GRACE_ANNOTATION`: kwok deletes it when the grace is over)."""
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    meta = pod["metadata"]
    through_grace = SERVE_THROUGH_GRACE_ANNOTATION in (meta.get("annotations") or {})
    return (
        (meta.get("deletionTimestamp") is None or through_grace)
        and status.get("phase") == "Running"
        and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    )


def _local_ip(pod: JSON) -> str | None:
    """The pod's IP if kwok gave it one (from the data path's pod range), else None: a pod on
    the virtual node shows no IP or its provider's, and is served by its provider."""
    ip = (pod.get("status") or {}).get("podIP")
    try:
        return ip if ip and ipaddress.IPv4Address(ip) in _POD_NETWORK else None
    except ValueError:
        return None


def listeners_of(pod: JSON) -> dict[Key, tuple[str, str]]:
    """``(ip, port) → (namespace, name)`` the pod should answer on now (empty: none)."""
    ip = _local_ip(pod)
    if ip is None or not _ready(pod):
        return {}
    who = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
    return {
        (ip, int(port["containerPort"])): who
        for container in pod["spec"].get("containers") or []
        for port in container.get("ports") or []
        if port.get("protocol", "TCP") == "TCP"
    }


class PodListeners:
    def __init__(self, kube: KubeClient, backends: NetnsSockets) -> None:
        self._backends = backends
        self.pods = Informer(kube, "/api/v1/pods", handler=self._on_pod)
        self.servers: dict[Key, tuple[tuple[str, str], asyncio.Server]] = {}
        self._wake = asyncio.Event()

    def _on_pod(self, kind: str, old: JSON | None, new: JSON) -> None:
        self._wake.set()

    def desired(self) -> dict[Key, tuple[str, str]]:
        found: dict[Key, tuple[str, str]] = {}
        for pod in self.pods.cache.values():
            found.update(listeners_of(pod))
        return found

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.pods.run(), name="pod-listeners-informer")
            try:
                while True:
                    await self._wake.wait()
                    self._wake.clear()
                    await self.reconcile()
            finally:
                self.close()

    async def reconcile(self) -> None:
        want = self.desired()
        for key in [k for k, (who, _) in self.servers.items() if want.get(k) != who]:
            self.servers.pop(key)[1].close()
            log.info("local replica %s:%d stopped", *key)
        for key, who in want.items():
            if key in self.servers:
                continue
            try:
                sock = await self._backends.listener(*key)
            except OSError as exc:
                log.warning("cannot listen at %s:%d for pod %s/%s: %s", *key, *who, exc)
                continue
            self.servers[key] = (who, await serve(sock, _answer(who)))
            log.info("local replica %s/%s answers at %s:%d", *who, *key)

    def close(self) -> None:
        for _, server in self.servers.values():
            server.close()
        self.servers.clear()


def _answer(who: tuple[str, str]) -> Any:
    body = {"namespace": who[0], "pod": who[1], "where": "local"}

    async def answer() -> JSON:
        return body

    return answer
