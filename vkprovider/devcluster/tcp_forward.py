"""Forward TCP connections from one address to another: the apiserver, for a namespaced node.

The dev cluster's apiserver listens on 127.0.0.1 only, and a process in another network
namespace (the real kubelet node of :mod:`vkprovider.devcluster.kubelet_node`, and its pods)
cannot reach the host's loopback. This forwarder listens on the host end of the node's veth
(``198.18.x.y``) and splices each connection to ``127.0.0.1:<apiserver port>``: bytes only, TLS
stays end to end. It runs as its own process (``python -m vkprovider.devcluster.tcp_forward
LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT``) so it is started and stopped by PID like every
other component, and it needs no iptables rule in the host's namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

_CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def serve(listen_host: str, listen_port: int, target_host: str, target_port: int) -> None:
    """Accept on ``listen_host:listen_port`` until cancelled; each connection gets its own pair
    of pipes to ``target_host:target_port`` (closed both ways when either side closes)."""

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            target_r, target_w = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, target_w), _pipe(target_r, client_w))

    server = await asyncio.start_server(handle, listen_host, listen_port)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: tcp_forward LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT", file=sys.stderr)
        return 2
    listen_host, listen_port, target_host, target_port = args
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listen_host, int(listen_port), target_host, int(target_port)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
