"""The node namespace's way to the apiserver: a TCP relay from ``127.0.0.1:6443`` there to the
apiserver on the host's loopback.

The control plane listens on 127.0.0.1 only (nothing of it is reachable from outside this
machine), and a namespace's loopback is its own, so kube-proxy in the node namespace could not
reach it. The relay carries its TLS connection unchanged, byte for byte — kube-proxy still
verifies the apiserver's certificate (127.0.0.1 is in it) and authenticates with its own. It
carries only the control plane's connection: Service traffic never passes here, kube-proxy's
nftables rules alone take it to the replicas.
"""

from __future__ import annotations

import asyncio
import contextlib

from vkprovider.devcluster.netns_socket import NetnsSockets

#: Where kube-proxy's kubeconfig points, inside the node namespace (its own loopback: no clash).
RELAY_PORT = 6443


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


async def relay(node: NetnsSockets, api_port: int, port: int = RELAY_PORT) -> asyncio.Server:
    """Listen at ``127.0.0.1:port`` in ``node``'s namespace, forward to ``127.0.0.1:api_port``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", api_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    sock = await node.listener("127.0.0.1", port)
    return await asyncio.start_server(handle, sock=sock)
