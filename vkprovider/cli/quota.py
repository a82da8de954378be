"""``vkprovider quota --config FILE``: keep a Kueue ClusterQueue's local quota in sync, standalone.

Reads the ``quota`` and ``kube`` sections of the service config. A ClusterQueue, flavor or
resource named there that does not exist is a clear error (exit 2) and nothing is written.
``--dry-run`` logs what would be written. SIGTERM/SIGINT stop it cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
from typing import Any

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
    return asyncio.run(_serve(settings.kube.kubeconfig, settings.kube.qps, settings.kube.burst, quota))


async def _serve(kubeconfig: str | None, qps: float, burst: int, quota: Any) -> int:
    from vkprovider.kube.client import KubeClient
    from vkprovider.kube.events import EventRecorder
    from vkprovider.quota.sync import QuotaSync

    kube = await KubeClient.connect(kubeconfig, qps=qps, burst=burst)
    try:
        recorder = EventRecorder(kube, component="vkprovider-quota", host=socket.gethostname())
        task = asyncio.create_task(QuotaSync(kube, quota, recorder).run())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return 0
    finally:
        await kube.close()
