"""The state half of ``/metrics``: computed at each scrape from the one place the state lives.

Pods by phase and provider, spend per hour, queue depth and provider usability are read from
the running term (its pod cache, tracker and queue) and the Placer, never kept in gauges that
are incremented and decremented (and so drift, or outlive a term). Between terms and on a
standby replica there is no running term, so these series are absent: only the replica that
acts reports them, and a new term reports its own fresh view. API requests are read from the
``KubeClient``'s counters (a replica's requests count whether or not it leads). The event
metrics (histograms, error counters) live in ``vkprovider.metrics``; both are served together.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController
from vkprovider.pods.term import Term

#: provider label of a pod no provider runs (yet): waiting for placement, or failed before it
NO_PROVIDER = "none"


class ServiceCollector:
    """A prometheus_client collector over one service's controller and placer."""

    def __init__(self, controller: PodController, placer: Placer) -> None:
        self.controller = controller
        self.placer = placer

    def acting_term(self) -> Term | None:
        """The term whose state is reported: running and synced (else none: standby, between)."""
        term = self.controller.term
        return term if self.controller.running and term.synced else None

    def collect(self) -> Iterable[Metric]:
        yield self._kube_requests()
        term = self.acting_term()
        if term is None:
            return
        yield self._pods(term)
        yield self._spend(term)
        queue = GaugeMetricFamily("vkprovider_queue_depth", "Pod keys waiting in the work queue")
        queue.add_metric([], len(term.queue))
        yield queue
        yield from self._providers()

    def _pods(self, term: Term) -> Metric:
        """Pods bound to the node, by the provider that runs them and their phase in the API."""
        counts: Counter[tuple[str, str]] = Counter()
        deployments = term.tracker.deployments
        for pod in list(term.informer.cache.values()):
            tracked = deployments.get(pod["metadata"].get("uid", ""))
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            counts[tracked.provider if tracked else NO_PROVIDER, phase] += 1
        family = GaugeMetricFamily(
            "vkprovider_pods",
            "Pods bound to the virtual node by provider (none: not deployed) and phase",
            labels=["provider", "phase"],
        )
        for (provider, phase), count in sorted(counts.items()):
            family.add_metric([provider, phase], count)
        return family

    def _spend(self, term: Term) -> Metric:
        """Hourly cost of the placed pods this term knows, after discounts, by provider and
        namespace (the same figure the namespace budgets count)."""
        rows: defaultdict[tuple[str, str], float] = defaultdict(float)
        placements = self.placer.placements()
        known = term.uid_keys.keys() | term.tracker.deployments.keys()
        for uid, (namespace, cost) in list(self.placer.budgets.holdings().items()):
            if uid in known:
                placed = placements.get(uid)
                rows[placed[0] if placed else "unknown", namespace] += cost
        family = GaugeMetricFamily(
            "vkprovider_spend_per_hour",
            "Spend rate of placed pods (offer price per hour after discount, in the providers' "
            "currency) by provider and namespace",
            labels=["provider", "namespace"],
        )
        for (provider, namespace), cost in sorted(rows.items()):
            family.add_metric([provider, namespace], cost)
        return family

    def _providers(self) -> Iterable[Metric]:
        health = self.placer.health
        usable = GaugeMetricFamily(
            "vkprovider_provider_usable",
            "1 if the provider may get new pods, 0 if unreachable or disabled (quota/billing)",
            labels=["provider"],
        )
        for name in sorted(self.placer.providers):
            usable.add_metric([name], 0 if health.unusable_reason(name) else 1)
        yield usable
        breaker = GaugeMetricFamily(
            "vkprovider_breaker_open", "1 while every provider fails: no new placements (circuit open)"
        )
        breaker.add_metric([], 1 if health.breaker_open() else 0)
        yield breaker

    def _kube_requests(self) -> Metric:
        family = CounterMetricFamily(
            "vkprovider_kube_requests",
            "Kubernetes API requests by verb, resource and HTTP status (0: no answer)",
            labels=["verb", "resource", "code"],
        )
        for (verb, resource, code), count in sorted(self.controller.kube.responses.items()):
            family.add_metric([verb, resource or "-", str(code)], count)
        return family


class _Process:
    """The process-wide registry: event metrics, the gate's, Python's own."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def service_registry(controller: PodController, placer: Placer) -> CollectorRegistry:
    """What the admin port's ``/metrics`` serves: the process's metrics plus this service's state."""
    registry = CollectorRegistry()
    registry.register(_Process())
    registry.register(ServiceCollector(controller, placer))
    return registry
