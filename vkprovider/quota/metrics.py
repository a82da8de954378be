"""Prometheus metrics of the quota sync."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

OFFERED = Gauge(
    "vkprovider_quota_offered",
    "What healthy local nodes offer, minus the reserve",
    ["cluster_queue", "resource"],
)
NOMINAL = Gauge(
    "vkprovider_quota_nominal", "nominalQuota last seen or written", ["cluster_queue", "resource"]
)
HEALTHY_NODES = Gauge("vkprovider_quota_healthy_nodes", "Local nodes counted in the quota", ["cluster_queue"])
WRITES = Counter("vkprovider_quota_writes_total", "ClusterQueue quota writes by outcome", ["outcome"])
HELD = Counter(
    "vkprovider_quota_held_total",
    "Times a lower quota was refused because admitted workloads use it",
    ["resource"],
)
