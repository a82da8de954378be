"""The state half of ``/metrics``: computed at each scrape from the one place the state lives.

Pods by phase and provider, spend per hour, queue depth and provider usability are read from
the running term (its pod cache, tracker and queue) and the Placer, never kept in gauges that
are incremented and decremented (and so drift, or outlive a term). Between terms and on a
standby replica there is no running term, so these series are absent: only the replica that
acts reports them, and a new term reports its own fresh view. API requests are read from the
``KubeClient``'s counters (a replica's requests count whether or not it leads). The event
metrics (histograms, error counters) live in ``vkprovider.metrics``; both are served together.

Every state series carries a ``node`` label (the virtual node, ``nodes:``): a replica may lead
some nodes and stand by for others, so each node's series come and go with its own term. API
requests are the process's (one client for every node), so they carry none.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController
from vkprovider.pods.term import Term

#: provider label of a pod no provider runs (yet): waiting for placement, or failed before it
NO_PROVIDER = "none"


class ServiceCollector:
    """A prometheus_client collector over the service's nodes: (controller, placer) each."""

    def __init__(self, nodes: Sequence[tuple[PodController, Placer]]) -> None:
        self.nodes = list(nodes)

    @staticmethod
    def acting_term(controller: PodController) -> Term | None:
        """The term whose state is reported: running and synced (else none: standby, between)."""
        term = controller.term
        return term if controller.running and term.synced else None

    def collect(self) -> Iterable[Metric]:
        yield self._kube_requests()
        acting = [(c.node_name, term, p) for c, p in self.nodes if (term := self.acting_term(c)) is not None]
        if not acting:
            return
        pods = GaugeMetricFamily(
            "vkprovider_pods",
            "Pods bound to the virtual node by provider (none: not deployed) and phase",
            labels=["node", "provider", "phase"],
        )
        spend = GaugeMetricFamily(
            "vkprovider_spend_per_hour",
            "Spend rate of placed pods (offer price per hour after discount, in the providers' "
            "currency) by provider and namespace",
            labels=["node", "provider", "namespace"],
        )
        queue = GaugeMetricFamily(
            "vkprovider_queue_depth", "Pod keys waiting in the work queue", labels=["node"]
        )
        usable = GaugeMetricFamily(
            "vkprovider_provider_usable",
            "1 if the provider may get new pods, 0 if unreachable or disabled (quota/billing)",
            labels=["node", "provider"],
        )
        breaker = GaugeMetricFamily(
            "vkprovider_breaker_open",
            "1 while every provider fails: no new placements (circuit open)",
            labels=["node"],
        )
        for node, term, placer in acting:
            _pods(pods, node, term)
            _spend(spend, node, term, placer)
            queue.add_metric([node], len(term.queue))
            health = placer.health
            for name in sorted(placer.providers):
                usable.add_metric([node, name], 0 if health.unusable_reason(name) else 1)
            breaker.add_metric([node], 1 if health.breaker_open() else 0)
        yield from (pods, spend, queue, usable, breaker)

    def _kube_requests(self) -> Metric:
        family = CounterMetricFamily(
            "vkprovider_kube_requests",
            "Kubernetes API requests by verb, resource and HTTP status (0: no answer)",
            labels=["verb", "resource", "code"],
        )
        responses: Counter[tuple[str, str, int]] = Counter()
        for kube in {id(c.kube): c.kube for c, _ in self.nodes}.values():  # one client, counted once
            responses.update(kube.responses)
        for (verb, resource, code), count in sorted(responses.items()):
            family.add_metric([verb, resource or "-", str(code)], count)
        return family


def _pods(family: GaugeMetricFamily, node: str, term: Term) -> None:
    """Pods bound to the node, by the provider that runs them and their phase in the API."""
    counts: Counter[tuple[str, str]] = Counter()
    deployments = term.tracker.deployments
    for pod in list(term.informer.cache.values()):
        tracked = deployments.get(pod["metadata"].get("uid", ""))
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        counts[tracked.provider if tracked else NO_PROVIDER, phase] += 1
    for (provider, phase), count in sorted(counts.items()):
        family.add_metric([node, provider, phase], count)


def _spend(family: GaugeMetricFamily, node: str, term: Term, placer: Placer) -> None:
    """Hourly cost of the placed pods this term knows, after discounts, by provider and
    namespace (the same figure the namespace budgets count)."""
    rows: defaultdict[tuple[str, str], float] = defaultdict(float)
    placements = placer.placements()
    known = term.uid_keys.keys() | term.tracker.deployments.keys()
    for uid, (namespace, cost) in list(placer.budgets.holdings().items()):
        if uid in known:
            placed = placements.get(uid)
            rows[placed[0] if placed else "unknown", namespace] += cost
    for (provider, namespace), cost in sorted(rows.items()):
        family.add_metric([node, provider, namespace], cost)


class _Process:
    """The process-wide registry: event metrics, the gate's, Python's own."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def service_registry(nodes: Sequence[tuple[PodController, Placer]]) -> CollectorRegistry:
    """What the admin port's ``/metrics`` serves: the process's metrics plus each node's state."""
    registry = CollectorRegistry()
    registry.register(_Process())
    registry.register(ServiceCollector(nodes))
    return registry
