"""Prometheus metrics of the quota sync."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

OFFERED = Gauge(
    "vkprovider_quota_offered",
    "What a flavor's healthy nodes offer, minus the reserve",
    ["flavor", "resource"],
)
USED = Gauge(
    "vkprovider_quota_used",
    "What admitted workloads of every ClusterQueue with quota in the flavor use",
    ["flavor", "resource"],
)
NOMINAL = Gauge(
    "vkprovider_quota_nominal",
    "nominalQuota last seen or written",
    ["cluster_queue", "flavor", "resource"],
)
HEALTHY_NODES = Gauge("vkprovider_quota_healthy_nodes", "Nodes counted in a flavor's offer", ["flavor"])
ON_HOLD = Gauge(
    "vkprovider_quota_on_hold",
    "1 while the sync holds the ClusterQueue (stopPolicy Hold: usage exceeds the offer)",
    ["cluster_queue"],
)
WRITES = Counter("vkprovider_quota_writes_total", "ClusterQueue quota writes by outcome", ["outcome"])
HOLDS = Counter(
    "vkprovider_quota_holds_total",
    "Times the sync set stopPolicy Hold because admitted usage exceeded the offer",
    ["cluster_queue"],
)
