"""The data path's one helper process: the apiserver relay into the node namespace
(:mod:`api_relay`) and the local replicas' listeners (:mod:`pod_listeners`).

A process of its own, started and stopped by PID with the cluster's other components, so the
data path outlives the command that started the cluster (``make cluster-up``) as they do.
``python -m vkprovider.devcluster.datapath_agent --kubeconfig K --api-port P --node-netns N
--backends-netns B``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

from vkprovider.devcluster.api_relay import relay
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.pod_listeners import PodListeners
from vkprovider.kube.client import KubeClient


async def run(args: argparse.Namespace) -> None:
    node, backends = NetnsSockets(args.node_netns), NetnsSockets(args.backends_netns)
    kube = await KubeClient.connect(args.kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await relay(node, args.api_port)
    listeners = PodListeners(kube, backends)
    task = asyncio.create_task(listeners.run())
    logging.info("data path agent: relay and local replica listeners running")
    try:
        await asyncio.wait([task, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # an unexpected end: say why
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        server.close()
        await kube.close()
        node.close()
        backends.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkprovider.devcluster.datapath_agent")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--api-port", type=int, required=True)
    parser.add_argument("--node-netns", required=True)
    parser.add_argument("--backends-netns", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
