"""An address the apiserver will proxy to, for the dev cluster's virtual node.

The apiserver refuses to proxy to loopback (``address not allowed``), so ``nodes/<n>/proxy``,
``kubectl logs`` and aggregated APIs cannot reach a kubelet API on 127.0.0.1. Here a network
namespace gets one end of a veth pair; the host end holds ``198.18.x.y/30`` (RFC 2544's
benchmarking range, 198.18.0.0/15, never routed anywhere), the namespace end the next address.
The service binds the host-side address and the Node advertises it: traffic stays on this
machine. Each cluster gets its own /30, picked under a file lock so parallel clusters never
collide, and ``remove()`` deletes the namespace and the pair (``ip netns list`` is empty of it).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import logging
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

NETWORK = ipaddress.IPv4Network("198.18.0.0/15")
_LOCK = Path("/tmp/vkprovider-netns.lock")


class NetnsError(RuntimeError):
    """The namespace could not be made (no ``ip``, no privilege): the caller decides what to do."""


def _ip(*args: str, check: bool = True) -> str:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f"ip {' '.join(args)}: {exc}") from None
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with _LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _used() -> set[str]:
    used = set()
    for line in _ip("-4", "-o", "addr", "show").splitlines():
        parts = line.split()
        if "inet" in parts:
            used.add(str(ipaddress.ip_interface(parts[parts.index("inet") + 1]).ip))
    return used


@dataclass(frozen=True)
class KubeletNet:
    """One namespace + veth pair; ``host_ip`` is where the kubelet API listens."""

    netns: str
    host_link: str
    host_ip: str
    ns_ip: str

    @classmethod
    def create(cls, tag: str) -> KubeletNet:
        netns = f"vkp-{tag}"[:40]
        with _locked():
            used = _used()
            for index, subnet in enumerate(NETWORK.subnets(new_prefix=30)):
                host, peer = list(subnet.hosts())
                if str(host) not in used and not Path(f"/sys/class/net/vkh{index}").exists():
                    break
            else:
                raise NetnsError(f"no free /30 left in {NETWORK}")
            net = cls(netns, f"vkh{index}", str(host), str(peer))
            ns_link = f"vkn{index}"
            try:
                _ip("netns", "add", netns)
                _ip("link", "add", net.host_link, "type", "veth", "peer", "name", ns_link)
                _ip("link", "set", ns_link, "netns", netns)
                _ip("addr", "add", f"{host}/30", "dev", net.host_link)
                _ip("link", "set", net.host_link, "up")
                _ip("-n", netns, "addr", "add", f"{peer}/30", "dev", ns_link)
                _ip("-n", netns, "link", "set", ns_link, "up")
                _ip("-n", netns, "link", "set", "lo", "up")
            except NetnsError:
                net.remove()
                raise
        log.info("kubelet network: %s on %s (namespace %s, peer %s)", host, net.host_link, netns, peer)
        return net

    def remove(self) -> None:
        """Delete the namespace (its veth end goes with it, and so the pair); safe to repeat."""
        _ip("netns", "del", self.netns, check=False)
        if Path(f"/sys/class/net/{self.host_link}").exists():
            _ip("link", "del", self.host_link, check=False)

    def to_json(self) -> dict[str, str]:
        return {
            "netns": self.netns,
            "host_link": self.host_link,
            "host_ip": self.host_ip,
            "ns_ip": self.ns_ip,
        }

    @classmethod
    def from_json(cls, data: dict[str, str]) -> KubeletNet:
        return cls(data["netns"], data["host_link"], data["host_ip"], data["ns_ip"])
