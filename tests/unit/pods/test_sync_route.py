"""A running external replica's route: asked of the provider once, recorded on the pod with the
status write that shows it Running; podIP stays empty; no route → condition + Warning Event."""

from __future__ import annotations

import json
from typing import Any

from pod_sync_fakes import NODE, Cloud, gpu_offer, gpu_pod, world

from vkprovider.models import Capabilities, DeploymentEndpoints, Phase, PortMapping, ProviderInfo
from vkprovider.pods.sync import SyncSettings
from vkprovider.traffic.config import TrafficConfig
from vkprovider.traffic.route import ANNOTATION_ROUTE, CONDITION_ROUTE, route_of

JSON = dict[str, Any]


class RoutedCloud(Cloud):
    """Declares ``endpoints``: every deployment at 198.18.7.<n>, container port + 30000."""

    def __init__(self, *, addresses: bool = True) -> None:
        super().__init__("cheap", [gpu_offer("cheap")])
        self.addresses = addresses
        self.asked: list[str] = []

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            name=self.name, adapter="routed", version="0", capabilities=Capabilities(endpoints=True)
        )

    async def endpoints(self, uid: str) -> DeploymentEndpoints:
        self.asked.append(uid)
        if not self.addresses:
            return DeploymentEndpoints(uid=uid)
        return DeploymentEndpoints(
            uid=uid, addresses=["198.18.7.1"], ports=[PortMapping(container_port=8000, port=38000)]
        )


def served_pod() -> JSON:
    pod = gpu_pod()
    pod["metadata"]["labels"] = {"app": "llm"}
    pod["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    return pod


def condition(pod: JSON) -> JSON:
    return next(c for c in pod["status"]["conditions"] if c["type"] == CONDITION_ROUTE)


async def running(w: Any) -> JSON:
    pod = w.kube.add_pod(served_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True, ip="10.99.0.4", provider_id="dep-1")
    await w.tracker.poll_once()
    await w.run(pod)
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Running"
    return shown


async def test_a_running_replica_records_its_route_and_shows_no_pod_ip() -> None:
    w = await world(cloud=RoutedCloud())
    shown = await running(w)
    route = route_of(shown)
    assert route is not None and route.endpoints.addresses == ["198.18.7.1"]
    assert route.endpoints.port_for(8000) == 38000 and route.deployment == "dep-1"
    assert "podIP" not in shown["status"] and "podIPs" not in shown["status"]  # the controller skips it
    cond = condition(shown)
    assert cond["status"] == "True" and "198.18.7.1" in cond["message"] and "8000→38000" in cond["message"]
    writes = w.kube.count("PATCH", "/status")
    await w.run(shown)  # nothing changed: no call, no write
    assert w.cloud.asked == ["uid-1"] and w.kube.count("PATCH", "/status") == writes


async def test_after_a_restart_the_route_on_the_pod_is_trusted_not_asked_again() -> None:
    first = await world(cloud=RoutedCloud())
    shown = await running(first)
    second = await world(kube=first.kube, cloud=first.cloud)  # a new process, same cluster and cloud
    await second.tracker.poll_once()
    await second.run(shown)
    assert first.cloud.asked == ["uid-1"]  # type: ignore[attr-defined]


async def test_a_provider_without_the_capability_leaves_the_replica_unpublished_and_says_so() -> None:
    w = await world()  # the plain in-memory cloud: no endpoints capability
    shown = await running(w)
    assert ANNOTATION_ROUTE not in shown["metadata"].get("annotations", {})
    assert "podIP" not in shown["status"]  # the provider-side IP is never published either
    cond = condition(shown)
    assert (cond["status"], cond["reason"]) == ("False", "NoRoute")
    assert "no endpoints capability" in cond["message"]
    assert w.kube.reasons().count("NoRoute") == 1
    await w.run(shown)
    assert w.kube.reasons().count("NoRoute") == 1  # once, not per reconcile


async def test_a_provider_reporting_no_address_gets_the_condition_too() -> None:
    w = await world(cloud=RoutedCloud(addresses=False))
    shown = await running(w)
    cond = condition(shown)
    assert (cond["status"], cond["reason"]) == ("False", "NoRoute") and "no address" in cond["message"]
    assert route_of(shown) is None
    assert "NoRoute" in w.kube.reasons()


async def test_a_redeploy_without_a_route_replaces_the_old_route_with_an_empty_one() -> None:
    w = await world(cloud=RoutedCloud())
    shown = await running(w)
    w.cloud.addresses = False  # type: ignore[attr-defined]
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True, provider_id="dep-2")
    await w.tracker.poll_once()
    await w.run(shown)
    after = w.kube.pod("ns", "p")
    assert after is not None
    route = route_of(after)
    assert route is not None and route.deployment == "dep-2" and route.endpoints.addresses == []
    assert json.loads(after["metadata"]["annotations"][ANNOTATION_ROUTE])["addresses"] == []


async def test_publishing_off_or_a_routable_provider_keeps_the_provider_ip_as_pod_ip() -> None:
    for traffic in (
        TrafficConfig(publish_endpoints=False),
        TrafficConfig(routable_pod_ip_providers=["cheap"]),
    ):
        settings = SyncSettings(node_name=NODE, host_ip="127.0.0.1", traffic=traffic)
        w = await world(cloud=RoutedCloud(), settings=settings)
        shown = await running(w)
        assert shown["status"]["podIP"] == "10.99.0.4"
        assert route_of(shown) is None and w.cloud.asked == []  # type: ignore[attr-defined]
        assert all(c["type"] != CONDITION_ROUTE for c in shown["status"]["conditions"])


async def test_an_ip_shown_before_is_cleared() -> None:
    w = await world(cloud=RoutedCloud())
    shown = await running(w)
    w.kube.update("ns", "p", {"status": {"podIP": "10.99.0.4", "podIPs": [{"ip": "10.99.0.4"}]}})
    again = w.kube.pod("ns", "p")
    await w.run(again)
    after = w.kube.pod("ns", "p")
    assert after is not None and "podIP" not in after["status"] and "podIPs" not in after["status"]
    assert shown["metadata"]["uid"] == after["metadata"]["uid"]


async def test_a_route_carried_by_the_status_is_published_without_asking_the_provider() -> None:
    w = await world(cloud=RoutedCloud())
    pod = w.kube.add_pod(served_pod())
    await w.run(pod)
    carried = DeploymentEndpoints(
        uid="uid-1", addresses=["198.18.9.9"], ports=[PortMapping(container_port=8000, port=8000)]
    )
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True, provider_id="dep-1", endpoints=carried)
    await w.tracker.poll_once()
    await w.run(pod)
    shown = w.kube.pod("ns", "p")
    assert shown is not None
    route = route_of(shown)
    assert route is not None and route.endpoints == carried and route.deployment == "dep-1"
    assert w.cloud.asked == []  # type: ignore[attr-defined]  # the status said it: no endpoints call
    assert condition(shown)["status"] == "True"


async def test_carried_endpoints_without_an_address_are_no_route_as_the_call_would_be() -> None:
    w = await world(cloud=RoutedCloud())
    pod = w.kube.add_pod(served_pod())
    await w.run(pod)
    empty = DeploymentEndpoints(uid="uid-1")
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True, provider_id="dep-1", endpoints=empty)
    await w.tracker.poll_once()
    await w.run(pod)
    shown = w.kube.pod("ns", "p")
    assert shown is not None
    assert (condition(shown)["status"], condition(shown)["reason"]) == ("False", "NoRoute")
    assert w.cloud.asked == [] and w.kube.reasons().count("NoRoute") == 1  # type: ignore[attr-defined]
