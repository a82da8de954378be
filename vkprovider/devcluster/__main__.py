"""``python -m vkprovider.devcluster {build,up,down,status}`` (behind ``make cluster-*``).

``up`` prints exactly one line on stdout, ``export KUBECONFIG=... PATH=...``, so that
``eval "$(make -s cluster-up)"`` works; progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from vkprovider.devcluster import metrics_server
from vkprovider.devcluster.build import BuildError, Toolchain, build
from vkprovider.devcluster.cluster import Cluster, run_root
from vkprovider.devcluster.kubelet_node import NodeUnavailable, RealNode, sweep_dead_nodes
from vkprovider.devcluster.kueue_build import build_kueue
from vkprovider.devcluster.process import StartupError


def _export_line(cluster: Cluster) -> str:
    return f"export KUBECONFIG={cluster.kubeconfig} PATH={Toolchain.default().bin_dir}:$PATH"


async def _up(
    name: str,
    nodes: int,
    with_metrics_server: bool = False,
    datapath: bool = False,
    real_node: bool = False,
    images: tuple[str, ...] = (),
) -> int:
    existing = Cluster.load(run_root() / name)
    if existing is not None and existing.running():
        if with_metrics_server:
            # metrics-server is started with its cluster (and stopped with it): saying nothing
            # here once left people waiting for `kubectl top` on a cluster without it.
            print(
                f"error: cluster {name!r} is already running, and --metrics-server starts metrics-server "
                "only with a new cluster: stop it first (make cluster-down), then run "
                ".venv/bin/python -m vkprovider.devcluster up --metrics-server",
                file=sys.stderr,
            )
            return 2
        print(f"cluster {name!r} is already running", file=sys.stderr)
        print(_export_line(existing))
        return 0
    started = time.monotonic()
    cluster = await Cluster.start(name, gpu_nodes=nodes, datapath=datapath)
    if cluster.datapath is not None:
        print(
            f"data path: kube-proxy in netns {cluster.datapath.node}; load: .venv/bin/python -m "
            f"vkprovider.devcluster.loadgen --netns {cluster.datapath.node} --target CLUSTER_IP:PORT",
            file=sys.stderr,
        )
    if with_metrics_server:
        try:
            url = await metrics_server.start(cluster)
        except BaseException:
            await cluster.stop()
            raise
        print(f"metrics-server on {url} (v1beta1.metrics.k8s.io)", file=sys.stderr)
    if real_node:
        try:
            node = await RealNode.start(cluster)
            for image in images:
                await asyncio.to_thread(node.import_image, image)
        except BaseException:
            await cluster.stop()
            raise
        print(
            f"real kubelet node {node.name} Ready at {node.address}; images: {', '.join(images) or 'none'}",
            file=sys.stderr,
        )
    print(
        f"cluster {name!r} ready in {time.monotonic() - started:.1f}s "
        f"({nodes} kwok GPU nodes); logs in {cluster.workdir / 'logs'}",
        file=sys.stderr,
    )
    print(_export_line(cluster))
    return 0


async def _down(name: str) -> int:
    cluster = Cluster.load(run_root() / name)
    if cluster is None:
        print(f"cluster {name!r} is not running", file=sys.stderr)
        return 0
    await cluster.stop()
    await asyncio.to_thread(sweep_dead_nodes)  # a real node of this cluster (up --real-node)
    print(f"cluster {name!r} stopped", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkprovider.devcluster")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build missing control-plane binaries into the cache")
    up = sub.add_parser("up", help="start a local control plane and leave it running")
    up.add_argument("--name", default="dev")
    up.add_argument("--nodes", type=int, default=2, help="kwok local-GPU nodes (default 2)")
    up.add_argument(
        "--metrics-server", action="store_true", help="also start metrics-server (kubectl top, HPA)"
    )
    up.add_argument(
        "--datapath",
        action="store_true",
        help="also kube-proxy (nftables) in a node namespace and listeners at the pods' IPs",
    )
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a real kubelet node that runs containers (root; docs/development.md)",
    )
    up.add_argument(
        "--image",
        action="append",
        default=[],
        help="with --real-node: copy this image from podman's store into the node (repeatable)",
    )
    down = sub.add_parser("down", help="stop a cluster started with up")
    down.add_argument("--name", default="dev")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build().bin_dir, file=sys.stderr)
            print(build_kueue().binary, file=sys.stderr)  # Kueue: its own module and cache
            return 0
        if args.command == "up":
            if args.nodes < 0:
                parser.error("--nodes must be >= 0")
            if args.datapath and args.nodes < 1:
                parser.error("--datapath needs --nodes >= 1 (kube-proxy stands for a kwok node)")
            if args.image and not args.real_node:
                parser.error("--image needs --real-node")
            return asyncio.run(
                _up(
                    args.name,
                    args.nodes,
                    args.metrics_server,
                    args.datapath,
                    args.real_node,
                    tuple(args.image),
                )
            )
        return asyncio.run(_down(args.name))
    except (BuildError, StartupError, NodeUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
