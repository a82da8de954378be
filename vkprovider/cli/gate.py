"""``vkprovider gate --config FILE``: run only the capacity gate (the same ``gate:`` section).

For clusters that run the gate apart from ``vkprovider serve`` (e.g. next to Prometheus). With
``leader_election.enabled`` it campaigns on its own Lease, ``<lease name>-gate``, so two gate
replicas never both write; SIGTERM stops it and leaves the taint as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from typing import Any

from vkprovider import logs
from vkprovider.config import Settings, load_settings
from vkprovider.errors import ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gate", help="run the capacity gate: free local GPUs -> taint on the virtual node"
    )
    parser.add_argument(
        "--config", type=Path, help="YAML config with a gate: section; VKPROVIDER_* variables override it"
    )
    parser.add_argument("--dry-run", action="store_true", help="log and record decisions, write nothing")
    parser.set_defaults(handler=_run)


async def run_gate(settings: Settings) -> None:
    """Connect, check the config against the cluster, then run (leader-elected if configured)."""
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
        name = f"{election.lease_name or f'vkprovider-{settings.node.name}'}-gate"
        # the taint's owner: this command's Lease (any leader of it), else this host's gate
        identity = f"lease:{election.namespace}/{name}" if election.enabled else default_identity("gate")
        gate = Gate(kube, settings.gate, settings.node.name, identity=identity)
        await gate.preflight()

        async def lead() -> None:
            await supervise("gate", gate.run)

        if election.enabled:
            main = LeaderElector(kube, election.namespace, name, election.identity).run(lead)
        else:
            main = lead()
        task = asyncio.ensure_future(main)
        stop = asyncio.ensure_future(stopping.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        task.cancel()
        stop.cancel()
        await asyncio.gather(task, stop, return_exceptions=True)
    finally:
        await kube.close()


def _run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    if settings.gate is None:
        raise ConfigError(f"gate: {args.config or 'the configuration'} has no gate: section")
    if args.dry_run:
        settings.gate.dry_run = True
    logs.configure(settings.log_level, json_lines=settings.log_json)
    asyncio.run(run_gate(settings))
    return 0
