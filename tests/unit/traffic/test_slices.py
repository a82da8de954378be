"""Which EndpointSlices a Service gets for the external replicas it selects (pure function)."""

from __future__ import annotations

from traffic_fakes import NODE, pod, route, service

from vkprovider.traffic.slices import (
    LABEL_HEADLESS,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    MANAGED_BY,
    desired_slices,
    differs,
)


def only(slices: dict) -> dict:  # type: ignore[type-arg]
    assert len(slices) == 1, slices
    return next(iter(slices.values()))


def test_a_routed_replica_is_published_at_its_address_and_mapped_port() -> None:
    svc = service("llm", selector={"app": "llm"})
    found = only(desired_slices(svc, [pod("a", route_value=route())], NODE))
    assert found["addressType"] == "IPv4"
    assert found["ports"] == [{"name": "web", "port": 38000, "protocol": "TCP"}]
    (endpoint,) = found["endpoints"]
    assert endpoint["addresses"] == ["198.18.7.1"]
    assert endpoint["conditions"] == {"ready": True, "serving": True, "terminating": False}
    assert endpoint["targetRef"] == {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}
    assert endpoint["nodeName"] == NODE
    labels = found["metadata"]["labels"]
    assert labels[LABEL_SERVICE_NAME] == "llm" and labels[LABEL_MANAGED_BY] == MANAGED_BY
    assert found["metadata"]["ownerReferences"][0]["uid"] == "svc-llm"


def test_named_target_ports_resolve_through_the_pods_container_ports() -> None:
    svc = service(
        "llm",
        selector={"app": "llm"},
        ports=[
            {"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"},
            {
                "name": "metrics",
                "port": 9090,
                "targetPort": "metrics",
                "protocol": "TCP",
                "appProtocol": "http",
            },
            {"name": "missing", "port": 81, "targetPort": "nope", "protocol": "TCP"},
        ],
    )
    replica = pod(
        "a",
        ports=[{"name": "http", "containerPort": 8000}, {"name": "metrics", "containerPort": 9100}],
        route_value=route(ports={8000: 38000, 9100: 39100}),
    )
    found = only(desired_slices(svc, [replica], NODE))
    assert found["ports"] == [
        {"name": "metrics", "port": 39100, "protocol": "TCP", "appProtocol": "http"},
        {"name": "web", "port": 38000, "protocol": "TCP"},
    ]  # the port the pod does not have is left out, as the controller does


def test_a_container_port_the_provider_does_not_publish_is_left_out() -> None:
    svc = service(
        "llm",
        selector={"app": "llm"},
        ports=[
            {"name": "web", "port": 80, "targetPort": 8000},
            {"name": "admin", "port": 81, "targetPort": 8001},
        ],
    )
    found = only(desired_slices(svc, [pod("a", route_value=route(ports={8000: 38000}))], NODE))
    assert [p["name"] for p in found["ports"]] == ["web"]


def test_replicas_with_different_mappings_get_a_slice_each_and_equal_ones_share() -> None:
    svc = service("llm", selector={"app": "llm"})
    pods = [
        pod("a", route_value=route("198.18.7.1", {8000: 38000})),
        pod("b", route_value=route("198.18.7.2", {8000: 38000})),
        pod("c", route_value=route("203.0.113.9", {8000: 41000})),
    ]
    slices = desired_slices(svc, pods, NODE)
    by_port = {s["ports"][0]["port"]: [e["addresses"][0] for e in s["endpoints"]] for s in slices.values()}
    assert by_port == {38000: ["198.18.7.1", "198.18.7.2"], 41000: ["203.0.113.9"]}
    assert desired_slices(svc, list(reversed(pods)), NODE) == slices  # names and order are stable


def test_several_services_select_the_same_replica_each_with_its_own_ports() -> None:
    replica = pod(
        "a", labels={"app": "llm", "tier": "gpu"}, route_value=route(ports={8000: 38000, 9100: 39100})
    )
    web = service("web", selector={"app": "llm"})
    metrics = service(
        "metrics", selector={"tier": "gpu"}, ports=[{"name": "m", "port": 9090, "targetPort": 9100}]
    )
    other = service("other", selector={"app": "else"})
    assert only(desired_slices(web, [replica], NODE))["ports"][0]["port"] == 38000
    assert only(desired_slices(metrics, [replica], NODE))["ports"][0]["port"] == 39100
    assert desired_slices(other, [replica], NODE) == {}


def test_headless_services_are_labelled_and_may_have_no_ports() -> None:
    svc = service("llm", selector={"app": "llm"}, clusterIP="None", ports=[])
    replica = pod("a", route_value=route(), hostname="a", subdomain="llm")
    found = only(desired_slices(svc, [replica], NODE))
    assert found["metadata"]["labels"][LABEL_HEADLESS] == ""  # kube-proxy ignores it, DNS serves it
    assert found["ports"] == []
    assert found["endpoints"][0]["hostname"] == "a"


def test_services_without_a_selector_and_external_names_are_not_ours() -> None:
    replica = pod("a", route_value=route())
    assert desired_slices(service("mine"), [replica], NODE) == {}
    assert desired_slices(service("ext", selector={"app": "llm"}, type="ExternalName"), [replica], NODE) == {}


def test_no_route_or_an_empty_route_or_a_finished_pod_is_not_published() -> None:
    svc = service("llm", selector={"app": "llm"})
    empty = route()
    empty = empty.replace('"addresses":["198.18.7.1"]', '"addresses":[]')
    finished = pod("d", route_value=route())
    finished["status"]["phase"] = "Failed"
    pods = [pod("a"), pod("b", route_value=empty), pod("c", route_value="{not json"), finished]
    assert desired_slices(svc, pods, NODE) == {}


def test_conditions_follow_the_pod_ready_terminating_and_publish_not_ready() -> None:
    svc = service("llm", selector={"app": "llm"})
    not_ready = pod("a", ready=False, route_value=route())
    terminating = pod("b", route_value=route())
    terminating["metadata"]["deletionTimestamp"] = "2026-12-04T21:00:00Z"
    endpoints = {
        e["targetRef"]["name"]: e["conditions"]
        for e in only(desired_slices(svc, [not_ready, terminating], NODE))["endpoints"]
    }
    assert endpoints["a"] == {"ready": False, "serving": False, "terminating": False}
    assert endpoints["b"] == {"ready": False, "serving": True, "terminating": True}
    eager = service("llm", selector={"app": "llm"}, publishNotReadyAddresses=True)
    assert only(desired_slices(eager, [not_ready], NODE))["endpoints"][0]["conditions"]["ready"] is True


def test_a_large_service_is_split_into_slices_of_at_most_max_endpoints() -> None:
    svc = service("llm", selector={"app": "llm"})
    pods = [pod(f"p{i:03}", route_value=route(f"198.18.8.{i}")) for i in range(1, 251)]
    slices = desired_slices(svc, pods, NODE, max_per_slice=100)
    assert sorted(len(s["endpoints"]) for s in slices.values()) == [50, 100, 100]


def test_ipv6_and_dns_names_get_their_address_type_and_garbage_is_dropped() -> None:
    svc = service("llm", selector={"app": "llm"})
    pods = [
        pod("a", route_value=route("2001:db8::7")),
        pod("b", route_value=route("a-1.proxy.example.net")),
        pod("c", route_value=route("not an address!")),
    ]
    kinds = sorted(s["addressType"] for s in desired_slices(svc, pods, NODE).values())
    assert kinds == ["FQDN", "IPv6"]


def test_differs_ignores_what_the_apiserver_adds_and_sees_what_we_set() -> None:
    svc = service("llm", selector={"app": "llm"})
    want = only(desired_slices(svc, [pod("a", route_value=route())], NODE))
    stored = {
        **want,
        "metadata": {
            **want["metadata"],
            "resourceVersion": "7",
            "generation": 1,
            "labels": {**want["metadata"]["labels"], "extra": "x"},
        },
    }
    assert not differs(stored, want)
    moved = only(desired_slices(svc, [pod("a", ready=False, route_value=route())], NODE))
    assert differs(stored, moved)


def test_endpoints_carry_the_virtual_nodes_zone_and_hints_only_for_a_close_traffic_distribution() -> None:
    replicas = [pod("a", route_value=route()), pod("b", ready=False, route_value=route("198.18.7.2"))]
    plain = only(desired_slices(service("llm", selector={"app": "llm"}), replicas, NODE, zone="vk-zone"))
    assert all(e["zone"] == "vk-zone" and "hints" not in e for e in plain["endpoints"])
    for distribution in ("PreferClose", "PreferSameZone"):
        svc = service("llm", selector={"app": "llm"}, trafficDistribution=distribution)
        found = only(desired_slices(svc, replicas, NODE, zone="vk-zone"))
        ready, not_ready = found["endpoints"]
        # As the controller's trafficdist: a ready endpoint is hinted for its zone, others are not.
        assert ready["hints"] == {"forZones": [{"name": "vk-zone"}]}
        assert "hints" not in not_ready
        assert differs(plain, found)  # a Service gaining the field rewrites the slice
    same_node = service("llm", selector={"app": "llm"}, trafficDistribution="PreferSameNode")
    (first, _) = only(desired_slices(same_node, replicas, NODE, zone="vk-zone"))["endpoints"]
    assert first["hints"] == {"forZones": [{"name": "vk-zone"}], "forNodes": [{"name": NODE}]}
    unzoned = only(desired_slices(service("llm", selector={"app": "llm"}), replicas, NODE))
    assert all("zone" not in e for e in unzoned["endpoints"])


def test_a_terminating_replica_loses_its_hint_as_it_stops_being_ready() -> None:
    svc = service("llm", selector={"app": "llm"}, trafficDistribution="PreferSameZone")
    leaving = pod("a", route_value=route())
    leaving["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:10Z"
    (endpoint,) = only(desired_slices(svc, [leaving], NODE, zone="vk-zone"))["endpoints"]
    assert endpoint["conditions"] == {"ready": False, "serving": True, "terminating": True}
    assert "hints" not in endpoint and endpoint["zone"] == "vk-zone"
