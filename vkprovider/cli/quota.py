"""``vkprovider quota --config FILE``: keep a Kueue ClusterQueue's local quota in sync, standalone.

Reads the ``quota`` and ``kube`` sections of the service config. A ClusterQueue, flavor or
resource named there that does not exist is a clear error (exit 2) and nothing is written.
``--dry-run`` logs what would be written. SIGTERM/SIGINT stop it cleanly (exit 0).
With ``leader_election.enabled`` two replicas share the Lease ``vkprovider-quota-<queue>`` (the
config's first queue; or ``leader_election.lease_name``) and only the holder syncs; each term
starts a fresh sync.
``vkprovider serve`` runs the same sync itself when its config has a ``quota:`` section (under
the service's own Lease); then this command is not needed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
from typing import Any

from vkprovider import eventloop
from vkprovider.errors import ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quota", help="keep a Kueue ClusterQueue's quota equal to healthy local nodes"
    )
    parser.add_argument("--config", required=True, help="service config file with a quota: section")
    parser.add_argument("--dry-run", action="store_true", help="compute and log, write nothing")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vkprovider.config import load_settings

    settings = load_settings(args.config)
    if settings.quota is None:
        raise ConfigError(f"{args.config}: quota: section missing (it names the ClusterQueue to sync)")
    quota = settings.quota.model_copy(update={"dry_run": settings.quota.dry_run or args.dry_run})
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return eventloop.run(_serve(settings, quota), settings.event_loop)


async def _serve(settings: Any, quota: Any) -> int:
    from vkprovider.kube.client import KubeClient
    from vkprovider.kube.leader import LeaderElector
    from vkprovider.quota.term import run_term

    kube = await KubeClient.connect(
        settings.kube.kubeconfig, qps=settings.kube.qps, burst=settings.kube.burst
    )
    try:

        async def term() -> None:  # one leadership term (or the whole run): fresh informers and state
            await run_term(kube, quota, socket.gethostname())

        election = settings.leader_election
        if election.enabled:
            lease = election.lease_name or f"vkprovider-quota-{quota.lease_suffix()}"
            elector = LeaderElector(kube, election.namespace, lease, election.identity)
            task = asyncio.create_task(elector.run(term))
        else:
            task = asyncio.create_task(term())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return 0
    finally:
        await kube.close()
