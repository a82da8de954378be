"""``/metrics``: the state series follow the running term (a deleted pod leaves them, a standby
reports none, a new term starts from its own view), and the event metrics are recorded where
the events happen (provider calls through the guard, placements, first deployments)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.placement.placement_support import MemProvider, offer, request
from vkprovider.errors import NoCapacity, Transient
from vkprovider.http.metrics import NO_PROVIDER, service_registry
from vkprovider.kube.client import KubeClient
from vkprovider.metrics import bound_at, observe_deployed
from vkprovider.models import DeploymentUsage
from vkprovider.placement import NotPlaced, PlacementConfig, Placer
from vkprovider.placement.types import PodContext
from vkprovider.plugins.api import SupportsMetrics, SupportsWatch
from vkprovider.plugins.guard import guard
from vkprovider.pods.controller import PodController

JSON = dict[str, Any]


def samples(controller: PodController, placer: Placer, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``{sorted labels: value}`` of metric ``name`` as ``/metrics`` serves it now, without the
    ``node`` label, which every state series of this one-node service must carry as ``vk``."""
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for (node, *labels), value in scrape([(controller, placer)], name).items():
        assert node == (None if name == "vkprovider_kube_requests_total" else ("node", "vk")), (name, node)
        out[tuple(label for label in labels if label is not None)] = value
    return out


def scrape(
    nodes: list[tuple[PodController, Placer]], name: str
) -> dict[tuple[tuple[str, str] | None, ...], float]:
    """``{(node label or None, other labels sorted...): value}`` of ``name`` on ``/metrics``."""
    text = generate_latest(service_registry(nodes)).decode()
    out: dict[tuple[tuple[str, str] | None, ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                labels = dict(sample.labels)
                node = ("node", labels.pop("node")) if "node" in labels else None
                out[(node, *sorted(labels.items()))] = sample.value
    return out


def pod(name: str, uid: str, phase: str | None = None, namespace: str = "team-a") -> JSON:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"nodeName": "vk"},
        "status": {"phase": phase} if phase else {},
    }


@pytest.fixture
async def kube() -> AsyncIterator[KubeClient]:
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    yield KubeClient(api)
    await api.close()


@pytest.fixture
async def service(kube: KubeClient) -> tuple[PodController, Placer, MemProvider]:
    cloud = MemProvider("cloud", [offer("cloud", "h100", 2.0)])
    config = PlacementConfig.model_validate({"providers": {"cloud": {"discount": 0.25}}})
    placer = Placer({"cloud": guard(cloud)}, config)
    await placer.refresh()
    controller = PodController(kube, placer.providers, placer, node_name="vk", host_ip="127.0.0.1")
    return controller, placer, cloud


def start_term(controller: PodController) -> None:
    """What ``run()`` does before work starts, without its loops: a fresh, synced term."""
    controller.terms += 1
    controller.term = controller._new_term()
    controller.running = True
    controller.term.synced = True


async def place(controller: PodController, placer: Placer, obj: JSON) -> None:
    """A pod arrives and is deployed, as the pod sync does it: cache, placement, tracker."""
    term, uid = controller.term, obj["metadata"]["uid"]
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    term.informer.cache[key] = obj
    term._on_pod("ADDED", None, obj)
    placed = await placer.deploy(request(uid, namespace=obj["metadata"]["namespace"]), PodContext("team-a"))
    term.tracker.record(uid, placed.provider, placed.status)


async def test_pods_and_spend_follow_the_term_and_a_deleted_pod_leaves_them(
    service: tuple[PodController, Placer, MemProvider],
) -> None:
    controller, placer, _ = service
    start_term(controller)
    await place(controller, placer, pod("a", "uid-a", "Running"))
    await place(controller, placer, pod("b", "uid-b"))
    waiting = pod("c", "uid-c")  # bound, not deployed yet
    controller.term.informer.cache["team-a/c"] = waiting

    pods = samples(controller, placer, "vkprovider_pods")
    assert pods == {
        (("phase", "Pending"), ("provider", "cloud")): 1,
        (("phase", "Running"), ("provider", "cloud")): 1,
        (("phase", "Pending"), ("provider", NO_PROVIDER)): 1,
    }
    spend = samples(controller, placer, "vkprovider_spend_per_hour")
    assert spend == {(("namespace", "team-a"), ("provider", "cloud")): pytest.approx(2 * 2.0 * 0.75)}

    # "a" is deleted: gone from the cache, its deployment forgotten, its placement released
    del controller.term.informer.cache["team-a/a"]
    controller.term.tracker.forget("uid-a")
    placer.release("uid-a")
    pods = samples(controller, placer, "vkprovider_pods")
    assert (("phase", "Running"), ("provider", "cloud")) not in pods
    assert sum(pods.values()) == 2
    assert samples(controller, placer, "vkprovider_spend_per_hour") == {
        (("namespace", "team-a"), ("provider", "cloud")): pytest.approx(1.5)
    }
    assert samples(controller, placer, "vkprovider_queue_depth") == {(): 2}  # a and b were enqueued


async def test_a_standby_reports_no_state_and_a_new_term_starts_fresh(
    service: tuple[PodController, Placer, MemProvider],
) -> None:
    controller, placer, _ = service
    assert samples(controller, placer, "vkprovider_pods") == {}  # never led
    start_term(controller)
    await place(controller, placer, pod("a", "uid-a", "Running"))
    assert samples(controller, placer, "vkprovider_pods") != {}

    controller.running = False  # the term ended: leadership lost, standby now
    for name in ("vkprovider_pods", "vkprovider_spend_per_hour", "vkprovider_queue_depth"):
        assert samples(controller, placer, name) == {}, name
    assert samples(controller, placer, "vkprovider_provider_usable") == {}

    start_term(controller)  # leader again: a fresh term knows nothing until it lists
    assert samples(controller, placer, "vkprovider_pods") == {}
    assert samples(controller, placer, "vkprovider_spend_per_hour") == {}
    assert not placer.budgets.holdings()  # the placement book is the term's: rebuilt by adoption
    assert samples(controller, placer, "vkprovider_provider_usable") == {(("provider", "cloud"),): 1}


async def test_api_requests_are_counted_by_verb_resource_and_code(
    service: tuple[PodController, Placer, MemProvider], kube: KubeClient
) -> None:
    controller, placer, _ = service
    kube.responses["GET", "pods", 200] += 3  # what _send counts per answer
    kube.responses["PATCH", "pods/status", 409] += 1
    got = samples(controller, placer, "vkprovider_kube_requests_total")
    assert got[(("code", "200"), ("resource", "pods"), ("verb", "GET"))] == 3
    assert got[(("code", "409"), ("resource", "pods/status"), ("verb", "PATCH"))] == 1


async def test_each_node_reports_its_own_state_under_its_node_label(kube: KubeClient) -> None:
    """Two virtual nodes of one process: a node's series carry its name and come with its own
    term (a node this replica stands by for reports none); API requests are counted once."""
    nodes = []
    for name, price in (("vk-a", 2.0), ("vk-b", 3.0)):
        placer = Placer(
            {f"cloud-{name}": guard(MemProvider(f"cloud-{name}", [offer(f"cloud-{name}", "h100", price)]))}
        )
        await placer.refresh()
        nodes.append(
            (PodController(kube, placer.providers, placer, node_name=name, host_ip="127.0.0.1"), placer)
        )
    (a, placer_a), (b, placer_b) = nodes
    start_term(a)  # this replica leads vk-a only
    await place(a, placer_a, pod("x", "uid-x", "Running"))
    assert scrape(nodes, "vkprovider_pods") == {
        (("node", "vk-a"), ("phase", "Running"), ("provider", "cloud-vk-a")): 1
    }
    start_term(b)
    await place(b, placer_b, pod("y", "uid-y"))
    assert scrape(nodes, "vkprovider_provider_usable") == {
        (("node", "vk-a"), ("provider", "cloud-vk-a")): 1,
        (("node", "vk-b"), ("provider", "cloud-vk-b")): 1,
    }
    assert scrape(nodes, "vkprovider_spend_per_hour") == {
        (("node", "vk-a"), ("namespace", "team-a"), ("provider", "cloud-vk-a")): 2.0,
        (("node", "vk-b"), ("namespace", "team-a"), ("provider", "cloud-vk-b")): 3.0,
    }
    assert set(scrape(nodes, "vkprovider_queue_depth")) == {(("node", "vk-a"),), (("node", "vk-b"),)}
    kube.responses["GET", "pods", 200] += 2
    assert (
        scrape(nodes, "vkprovider_kube_requests_total")[
            (None, ("code", "200"), ("resource", "pods"), ("verb", "GET"))
        ]
        == 2
    )


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_provider_calls_are_timed_and_errors_counted_by_class() -> None:
    cloud = MemProvider("guarded-cloud", [offer("guarded-cloud", "h100", 1.0)])
    cloud.failures = [NoCapacity("sold out"), RuntimeError("adapter bug")]
    provider = guard(cloud)
    calls = value("vkprovider_provider_call_seconds_count", provider="guarded-cloud", call="deploy")

    def errors() -> dict[str, float]:  # the registry is the process's: counted from here on
        return {
            error: value(
                "vkprovider_provider_call_errors_total", provider="guarded-cloud", call="deploy", error=error
            )
            for error in ("NoCapacity", "AdapterBug", "Transient")
        }

    before = errors()
    with pytest.raises(NoCapacity):
        await provider.deploy(request("u1"))
    with pytest.raises(Exception, match="unexpected RuntimeError"):
        await provider.deploy(request("u1"))
    await provider.deploy(request("u1"))
    counted = {error: n - before[error] for error, n in errors().items()}
    assert counted == {"NoCapacity": 1, "AdapterBug": 1, "Transient": 0}
    after = value("vkprovider_provider_call_seconds_count", provider="guarded-cloud", call="deploy")
    assert after - calls == 3


async def test_placement_latency_is_recorded_by_outcome() -> None:
    cloud = MemProvider("placing", [offer("placing", "h100", 1.0)])
    placer = Placer({"placing": guard(cloud)})
    await placer.refresh()
    before = {o: value("vkprovider_placement_seconds_count", outcome=o) for o in ("placed", "NoCandidates")}
    await placer.deploy(request("p1"), PodContext("ns"))
    with pytest.raises(NotPlaced):
        await placer.deploy(request("p2", gpu="B200-SXM-192GB"), PodContext("ns"))
    after = {o: value("vkprovider_placement_seconds_count", outcome=o) for o in before}
    assert {o: after[o] - before[o] for o in before} == {"placed": 1, "NoCandidates": 1}


def test_bound_to_deployed_lag_reads_the_binding_then_the_creation() -> None:
    scheduled = {
        "metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-01T10:00:30Z"}
            ]
        },
    }
    assert bound_at(scheduled) == bound_at({"metadata": {"creationTimestamp": "2026-12-01T10:00:30Z"}})
    assert bound_at({"metadata": {"creationTimestamp": "garbage"}}) is None
    count = value("vkprovider_bound_to_deployed_seconds_count", provider="lagged")
    total = value("vkprovider_bound_to_deployed_seconds_sum", provider="lagged")
    observe_deployed(scheduled, "lagged", now=bound_at(scheduled) + 12.5)  # type: ignore[operator]
    observe_deployed({"metadata": {}}, "lagged")  # no timestamps: nothing to measure
    assert value("vkprovider_bound_to_deployed_seconds_count", provider="lagged") - count == 1
    assert value("vkprovider_bound_to_deployed_seconds_sum", provider="lagged") - total == 12.5


class Metered(MemProvider):
    """An adapter with ``usage``: the figures, then a bug, then a malformed reply."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.replies: list[Any] = []

    async def usage(self, node_name: str) -> list[DeploymentUsage]:
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply  # type: ignore[no-any-return]


async def test_usage_goes_through_the_guard_like_every_call() -> None:
    assert not isinstance(guard(MemProvider("plain")), SupportsMetrics)  # only where the adapter has it
    adapter = Metered("metered")
    figures = [DeploymentUsage(uid="u1", timestamp=datetime.now(UTC))]
    adapter.replies = [figures, KeyError("boom"), ["not usage"], NoCapacity("odd")]
    provider = guard(adapter)
    assert isinstance(provider, SupportsMetrics) and not isinstance(provider, SupportsWatch)
    bugs = value(
        "vkprovider_provider_call_errors_total", provider="metered", call="usage", error="AdapterBug"
    )
    # The registry is process-wide and other tests meter a provider named "metered" too: count
    # from here, not from zero, or the result depends on test order.
    calls = value("vkprovider_provider_call_seconds_count", provider="metered", call="usage")
    assert await provider.usage("vk") == figures
    with pytest.raises(Transient, match="unexpected KeyError"):
        await provider.usage("vk")
    with pytest.raises(Transient, match="list of DeploymentUsage"):
        await provider.usage("vk")
    with pytest.raises(NoCapacity) as caught:
        await provider.usage("vk")
    assert caught.value.provider == "metered"
    errors = value(
        "vkprovider_provider_call_errors_total", provider="metered", call="usage", error="AdapterBug"
    )
    assert errors - bugs == 2
    assert value("vkprovider_provider_call_seconds_count", provider="metered", call="usage") - calls == 4
