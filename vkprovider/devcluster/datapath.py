"""The dev cluster's data path: a node namespace (kube-proxy, the load generator) and a backends
namespace (every replica's address), joined by a veth pair.

Every address is in 198.19.0.0/16, half of RFC 2544's benchmarking range (198.18.0.0/15; the
other half holds the kubelet network's /30s, :mod:`netns`), never a private range, and lives only
inside these two namespaces, so clusters running side by side use the same plan without meeting:

================== ============================================================================
198.19.0.0/24      Service ClusterIPs (the apiserver's ``--service-cluster-ip-range``)
198.19.32.0/30     the node↔backends link (.1 node end, .2 backends end)
198.19.64.0/18     kwok's pod IPs: local replicas (``kwok --cidr``)
198.19.128.0/17    fakeclouds' ``ip_range``: provider *i* gets ``198.19.(128+16i).0/20``
================== ============================================================================

The backends namespace holds the replica ranges as *local* routes (``ip route add local … dev
lo``), so a listener can bind any address in them without adding it to an interface. The node
namespace routes the kwok range to the backends end, and a provider's range only once
:meth:`DataPath.route` is called for it: a provider without a route has none, as in a cluster
whose network does not reach the provider. Removing the two namespaces removes every address,
route and nft table in them (kube-proxy's included).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import shutil
from dataclasses import dataclass

from vkprovider.devcluster.netns import NetnsError, _ip

log = logging.getLogger(__name__)

SERVICE_CIDR = "198.19.0.0/24"
#: The ``kubernetes`` Service's ClusterIP (the first of SERVICE_CIDR), in the apiserver's cert.
KUBERNETES_SERVICE_IP = "198.19.0.1"
LINK_CIDR = "198.19.32.0/30"
NODE_LINK_IP = "198.19.32.1"
BACKENDS_LINK_IP = "198.19.32.2"
POD_CIDR = "198.19.64.0/18"
PROVIDERS_CIDR = "198.19.128.0/17"
PROVIDER_PREFIX = 20


def provider_range(index: int) -> str:
    """The ``ip_range`` of the ``index``-th fakecloud (0-based): a /20 of PROVIDERS_CIDR."""
    ranges = list(ipaddress.IPv4Network(PROVIDERS_CIDR).subnets(new_prefix=PROVIDER_PREFIX))
    if not 0 <= index < len(ranges):
        raise ValueError(f"provider index {index}: the data path has {len(ranges)} provider ranges")
    return str(ranges[index])


def why_unavailable() -> str | None:
    """Why this machine cannot run the data path (no ``ip netns``, no ``nft`` and no apt-get to
    install it), or None: tests skip with this reason."""
    if shutil.which("nft") is None and shutil.which("apt-get") is None:
        return "nft is not installed and apt-get is not available to install it"
    probe = f"vkp-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except NetnsError as exc:
        return f"cannot create network namespaces: {exc}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class DataPath:
    """The two namespaces of one cluster; ``node`` is where kube-proxy and the load run."""

    node: str
    backends: str

    @classmethod
    def create(cls, tag: str) -> DataPath:
        tag = re.sub(r"[^a-z0-9-]", "-", tag.lower())[:24]
        path = cls(f"vkp-{tag}-node", f"vkp-{tag}-back")
        path.remove()  # a previous run's, killed before it cleaned up
        try:
            _ip("netns", "add", path.node)
            _ip("netns", "add", path.backends)
            # Created inside the node namespace, the peer moved at once: no host-side name.
            _ip("-n", path.node, "link", "add", "to-back", "type", "veth", "peer", "name", "to-node",
                "netns", path.backends)  # fmt: skip
            for netns, link, address in (
                (path.node, "to-back", NODE_LINK_IP),
                (path.backends, "to-node", BACKENDS_LINK_IP),
            ):
                _ip("-n", netns, "addr", "add", f"{address}/30", "dev", link)
                _ip("-n", netns, "link", "set", link, "up")
                _ip("-n", netns, "link", "set", "lo", "up")
            for cidr in (POD_CIDR, PROVIDERS_CIDR):
                _ip("-n", path.backends, "route", "add", "local", cidr, "dev", "lo")
            _ip("-n", path.backends, "route", "add", "default", "via", NODE_LINK_IP)
            # ClusterIPs need a route for a connect() to leave at all; kube-proxy's DNAT then
            # sends the packet to a replica (no default route: an unrouted provider stays so).
            path.route(SERVICE_CIDR)
            path.route(POD_CIDR)
        except NetnsError:
            path.remove()
            raise
        log.info("data path: node namespace %s, backends namespace %s", path.node, path.backends)
        return path

    def route(self, cidr: str) -> None:
        """Route ``cidr`` (a provider's range) from the node namespace to the backends."""
        _ip("-n", self.node, "route", "replace", cidr, "via", BACKENDS_LINK_IP)

    def unroute(self, cidr: str) -> None:
        _ip("-n", self.node, "route", "del", cidr, check=False)

    def routes(self) -> list[str]:
        """The node namespace's routes via the backends (for tests and ``make`` output)."""
        out = _ip("-n", self.node, "-4", "route", "show", "via", BACKENDS_LINK_IP)
        return [line.split()[0] for line in out.splitlines() if line.strip()]

    def remove(self) -> None:
        """Delete both namespaces (the veth pair, routes and nft tables go with them); repeatable."""
        for netns in (self.node, self.backends):
            _ip("netns", "del", netns, check=False)

    def to_json(self) -> dict[str, str]:
        return {"node": self.node, "backends": self.backends}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> DataPath:
        return cls(data["node"], data["backends"])
