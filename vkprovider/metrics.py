"""Prometheus metrics the service exports on the admin port's ``/metrics``."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter("vkprovider_reconciles_total", "Pod reconciles by outcome", ["outcome"])
RECONCILE_SECONDS = Histogram(
    "vkprovider_reconcile_seconds",
    "Time to reconcile one pod",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
QUEUE_DEPTH = Gauge("vkprovider_queue_depth", "Pod keys waiting in the work queue")
ORPHANS_DELETED = Counter("vkprovider_orphans_deleted_total", "Orphaned deployments deleted")
