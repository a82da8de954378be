"""The quota sync as a part of a longer-running process (``vkprovider serve``, ``vkprovider
quota``): a start-up check that refuses a missing target before anything is written, and one
leadership term, which always starts from a fresh :class:`QuotaSync` (its informers and what it
last wrote belong to that term).
"""

from __future__ import annotations

from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeNotFound
from vkprovider.kube.events import EventRecorder
from vkprovider.quota.config import QuotaConfig
from vkprovider.quota.sync import QuotaSync, cluster_queue_path, locate_all

COMPONENT = "vkprovider-quota"


async def preflight(kube: KubeClient, config: QuotaConfig) -> None:
    """Raise ``QuotaTargetError`` (a ``ConfigError``: exit 2, field named) when a configured
    ClusterQueue, flavor or resource does not exist. A missing Kueue API reads as a missing queue."""
    for name in config.queue_names():
        try:
            cq = await kube.request("GET", cluster_queue_path(name))
        except KubeNotFound:
            cq = None
        locate_all(config, name, cq)


async def run_term(kube: KubeClient, config: QuotaConfig, host: str) -> None:
    """Sync until cancelled (the end of the term), from fresh state."""
    await QuotaSync(kube, config, EventRecorder(kube, component=COMPONENT, host=host)).run()
