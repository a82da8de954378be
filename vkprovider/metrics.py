"""Prometheus metrics the service exports on the admin port's ``/metrics``.

These are the *event* metrics: counters and histograms recorded where the event happens (a
reconcile, a placement, a provider call, a first deployment). Everything that is *state* (pods
by phase, spend per hour, queue depth, API requests) is computed at scrape time from the one
place that state lives (``vkprovider.http.metrics``), so it can never drift, starts fresh with
each leadership term and reports nothing on a standby. Labels stay bounded: provider, call,
error class, outcome — never a pod name or UID. The operator's list is in docs/operations.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Histogram

RECONCILES = Counter("vkprovider_reconciles_total", "Pod reconciles by outcome", ["outcome"])
RECONCILE_SECONDS = Histogram(
    "vkprovider_reconcile_seconds",
    "Time to reconcile one pod",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
ORPHANS_DELETED = Counter("vkprovider_orphans_deleted_total", "Orphaned deployments deleted")

PLACEMENT_SECONDS = Histogram(
    "vkprovider_placement_seconds",
    "Time to place one pod (rank, then every candidate tried), by outcome: placed, or why not",
    ["outcome"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
PROVIDER_CALL_SECONDS = Histogram(
    "vkprovider_provider_call_seconds",
    "Latency of provider adapter calls (successful or not), by provider and call",
    ["provider", "call"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PROVIDER_CALL_ERRORS = Counter(
    "vkprovider_provider_call_errors_total",
    "Failed provider adapter calls by provider, call and error class "
    "(InvalidRequest, Unsupported, NoCapacity, Transient, QuotaOrBilling, NotFound, ProviderError, "
    "AdapterBug, Cancelled)",
    ["provider", "call", "error"],
)
BOUND_TO_DEPLOYED_SECONDS = Histogram(
    "vkprovider_bound_to_deployed_seconds",
    "From the pod's binding to this node (PodScheduled, else its creation) to the provider "
    "accepting its first deployment, by provider",
    ["provider"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
)


#: Series created at zero up front: Prometheus's ``rate()``/``increase()`` cannot see the first
#: value of a series that appears already counted, so a first error (or a burst of first
#: deployments inside one scrape interval) would read as nothing.
PLACEMENT_OUTCOMES = ("placed", "NoCandidates", "BudgetExceeded", "CircuitOpen", "AllProvidersFailed")
PROVIDER_CALLS = ("info", "probe", "offers", "deploy", "get", "list", "delete", "usage")
ERROR_CLASSES = (
    "InvalidRequest",
    "Unsupported",
    "NoCapacity",
    "Transient",
    "QuotaOrBilling",
    "NotFound",
    "ProviderError",
    "AdapterBug",
    "Cancelled",
)
for _outcome in ("done", "requeued", "transient", "error", "bug"):
    RECONCILES.labels(_outcome)
for _outcome in PLACEMENT_OUTCOMES:
    PLACEMENT_SECONDS.labels(_outcome)


def prepare_provider(name: str) -> None:
    """Create ``name``'s per-provider series at zero (the guard does, once per provider)."""
    BOUND_TO_DEPLOYED_SECONDS.labels(name)
    for call in PROVIDER_CALLS:
        PROVIDER_CALL_SECONDS.labels(name, call)
        for error in ERROR_CLASSES:
            PROVIDER_CALL_ERRORS.labels(name, call, error)


def bound_at(pod: Mapping[str, Any]) -> float | None:
    """Wall-clock time the pod was bound: PodScheduled's transition, else its creation."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            moment = _parse(condition.get("lastTransitionTime"))
            if moment is not None:
                return moment
    return _parse((pod.get("metadata") or {}).get("creationTimestamp"))


def observe_deployed(pod: Mapping[str, Any], provider: str, now: float | None = None) -> None:
    """The provider accepted the pod's first deployment: record the lag since it was bound."""
    bound = bound_at(pod)
    if bound is not None:
        lag = (time.time() if now is None else now) - bound
        BOUND_TO_DEPLOYED_SECONDS.labels(provider).observe(max(lag, 0.0))


def _parse(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
