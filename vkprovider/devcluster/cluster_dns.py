"""A minimal cluster DNS for the real kubelet node: ``<service>.<namespace>.svc.<domain>`` → ClusterIP.

Pods of :mod:`vkprovider.devcluster.kubelet_node` resolve Service names the way they would with
CoreDNS (``/etc/resolv.conf`` from the kubelet's ``clusterDNS``/``clusterDomain``, search list
and ``ndots:5``), and kube-proxy in the node's namespace carries the ClusterIP to the pods.
No CoreDNS is built for it: this answers only what the dev cluster needs — A queries for
Services with a ClusterIP, looked up in the apiserver on each query (no cache, no watch: a Service
is visible the moment it exists). Anything else gets NXDOMAIN, or an empty answer (NOERROR) for
another record type of a name that exists (so resolvers do not give up on the A record).

Runs as its own process, stopped by PID: ``python -m vkprovider.devcluster.cluster_dns
--listen HOST:PORT --kubeconfig PATH [--domain cluster.local]`` (UDP only; answers fit in 512
bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import ssl
import struct
import sys
from typing import Any, cast

import httpx
import yaml

_A, _IN = 1, 1
_NOERROR, _SERVFAIL, _NXDOMAIN = 0, 2, 3
TTL_SECONDS = 5


def parse_query(packet: bytes) -> tuple[int, int, str, int, bytes]:
    """(id, flags, name, qtype, the question section as sent) of a one-question query."""
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if qdcount != 1:
        raise ValueError(f"{qdcount} questions")
    labels, offset = [], 12
    while (length := packet[offset]) != 0:
        if length & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii").lower())
        offset += 1 + length
    qtype, _ = struct.unpack("!HH", packet[offset + 1 : offset + 5])
    return ident, flags, ".".join(labels), qtype, packet[12 : offset + 5]


def response(ident: int, flags: int, question: bytes, rcode: int, address: str | None = None) -> bytes:
    """The reply: the question echoed, and one A record (a pointer to the question's name)."""
    answers = 1 if address else 0
    header = struct.pack("!HHHHHH", ident, 0x8180 | (flags & 0x0100) | rcode, 1, answers, 0, 0)
    body = question
    if address:
        rdata = ipaddress.IPv4Address(address).packed
        body += struct.pack("!HHHIH", 0xC00C, _A, _IN, TTL_SECONDS, len(rdata)) + rdata
    return header + body


def service_of(name: str, domain: str) -> tuple[str, str] | None:
    """(namespace, service) of ``<service>.<namespace>.svc.<domain>``, or None."""
    suffix = f".svc.{domain}"
    if not name.endswith(suffix):
        return None
    parts = name.removesuffix(suffix).split(".")
    return (parts[1], parts[0]) if len(parts) == 2 else None


class Resolver(asyncio.DatagramProtocol):
    def __init__(self, client: httpx.AsyncClient, domain: str) -> None:
        self.client, self.domain = client, domain
        self.transport: asyncio.DatagramTransport | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # the selector loop's datagram transport is not a DatagramTransport subclass
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(data, addr))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        try:
            ident, flags, name, qtype, question = parse_query(data)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError):
            return  # not a query we can read: no answer, as for garbage
        try:
            reply = response(ident, flags, question, *(await self._lookup(name, qtype)))
        except httpx.HTTPError:
            reply = response(ident, flags, question, _SERVFAIL)
        if self.transport is not None:
            self.transport.sendto(reply, addr)

    async def _lookup(self, name: str, qtype: int) -> tuple[int, str | None]:
        found = service_of(name, self.domain)
        if found is None:
            return _NXDOMAIN, None
        namespace, service = found
        resp = await self.client.get(f"/api/v1/namespaces/{namespace}/services/{service}")
        if resp.status_code == 404:
            return _NXDOMAIN, None
        resp.raise_for_status()
        cluster_ip = resp.json()["spec"].get("clusterIP")
        if not cluster_ip or cluster_ip == "None":
            return _NXDOMAIN, None
        return _NOERROR, cluster_ip if qtype == _A else None


def admin_client(kubeconfig: str) -> httpx.AsyncClient:
    """An HTTP client from a kubeconfig with a client certificate (the dev cluster's admin)."""
    with open(kubeconfig) as handle:
        config = yaml.safe_load(handle)
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    return httpx.AsyncClient(base_url=cluster["server"], verify=context, timeout=5.0)


async def serve(host: str, port: int, kubeconfig: str, domain: str) -> None:
    async with admin_client(kubeconfig) as client:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: Resolver(client, domain), local_addr=(host, port)
        )
        try:
            await asyncio.Event().wait()
        finally:
            transport.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cluster_dns", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--listen", required=True, help="HOST:PORT (UDP)")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--domain", default="cluster.local")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    host, _, port = args.listen.rpartition(":")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(host, int(port), args.kubeconfig, args.domain))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
