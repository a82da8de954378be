"""``vkprovider gate --config FILE``: run only the capacity gate (the same ``gate:`` section).

For clusters that run the gate apart from ``vkprovider serve`` (e.g. next to Prometheus). It
gates every configured node (``nodes:``, or the one ``node:``), as ``serve`` does, or only those
named by ``--node`` (repeatable; a name not configured is refused naming the flag). With
``leader_election.enabled`` each node's gate campaigns on its own Lease, ``<lease name>-gate``
(``vkprovider-<node>-gate`` unless ``lease_name`` is set), so two gate replicas never both write
a node's taint and replicas may split the nodes; SIGTERM stops it and leaves the taints as they
are.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from vkprovider import eventloop, logs
from vkprovider.config import NodeConfig, Settings, load_settings
from vkprovider.errors import ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gate", help="run the capacity gate: free local GPUs -> taint on the virtual node"
    )
    parser.add_argument(
        "--config", type=Path, help="YAML config with a gate: section; VKPROVIDER_* variables override it"
    )
    parser.add_argument(
        "--node",
        action="append",
        metavar="NAME",
        help="gate only this configured node (repeat for several; default: every configured node)",
    )
    parser.add_argument("--dry-run", action="store_true", help="log and record decisions, write nothing")
    parser.set_defaults(handler=_run)


def gated_nodes(settings: Settings, names: list[str] | None) -> list[NodeConfig]:
    """The configured nodes ``--node`` names (all of them without it), in the order named."""
    configured = {node.name: node for node in settings.node_list()}
    if not names:
        return list(configured.values())
    unknown = [name for name in names if name not in configured]
    if unknown:
        raise ConfigError(
            f"--node: {unknown[0]!r} is not a configured node (the configuration has: {', '.join(configured)})"
        )
    return [configured[name] for name in dict.fromkeys(names)]


async def run_gate(settings: Settings, nodes: list[NodeConfig] | None = None) -> None:
    """Connect, check the config against the cluster, then run a gate for each of ``nodes``
    (default: every configured node), each leader-elected on its own Lease if configured."""
    from vkprovider.gate.claim import default_identity
    from vkprovider.gate.loop import Gate  # heavy imports only for this command
    from vkprovider.kube.client import KubeClient
    from vkprovider.kube.leader import LeaderElector
    from vkprovider.tasks import supervise

    assert settings.gate is not None
    kube = await KubeClient.connect(
        settings.kube.kubeconfig, qps=settings.kube.qps, burst=settings.kube.burst
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        election = settings.leader_election
        mains: list[Coroutine[Any, Any, None]] = []
        for node in nodes or settings.node_list():
            name = f"{election.lease_name or f'vkprovider-{node.name}'}-gate"
            # the taint's owner: this command's Lease (any leader of it), else this host's gate
            identity = f"lease:{election.namespace}/{name}" if election.enabled else default_identity("gate")
            gate = Gate(kube, settings.gate, node.name, identity=identity)
            if not mains:  # one gate: section for every node, so one check
                await gate.preflight()
            lead = functools.partial(supervise, f"gate {node.name}", gate.run)
            if election.enabled:
                mains.append(LeaderElector(kube, election.namespace, name, election.identity).run(lead))
            else:
                mains.append(lead())
        tasks = [asyncio.ensure_future(main) for main in mains]
        stop = asyncio.ensure_future(stopping.wait())
        await asyncio.wait({*tasks, stop}, return_when=asyncio.FIRST_COMPLETED)
        for task in (*tasks, stop):
            task.cancel()
        await asyncio.gather(*tasks, stop, return_exceptions=True)
    finally:
        await kube.close()


def _run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    if settings.gate is None:
        raise ConfigError(f"gate: {args.config or 'the configuration'} has no gate: section")
    nodes = gated_nodes(settings, args.node)
    if args.dry_run:
        settings.gate.dry_run = True
    logs.configure(settings.log_level, json_lines=settings.log_json)
    eventloop.run(run_gate(settings, nodes), settings.event_loop)
    return 0
