"""The publisher writes only differences, owns only its slices, and rebuilds after a restart."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from traffic_fakes import NODE, FakeInformer, SliceApi, pod, route, service

from vkprovider.kube.errors import KubeUnavailable
from vkprovider.traffic.publisher import EndpointPublisher
from vkprovider.traffic.slices import LABEL_SERVICE_NAME

JSON = dict[str, Any]


def publisher(api: SliceApi, pods: list[JSON], services: list[JSON]) -> EndpointPublisher:
    pub = EndpointPublisher(
        api,  # type: ignore[arg-type]
        NODE,
        pods=FakeInformer(pods),  # type: ignore[arg-type]
        services=FakeInformer(services),  # type: ignore[arg-type]
    )
    seen(pub, api)
    return pub


def seen(pub: EndpointPublisher, api: SliceApi) -> None:
    """The slice informer catches up with the API (what its watch does)."""
    pub.slices.cache = {f"{ns}/{name}": copy.deepcopy(s) for (ns, name), s in api.slices.items()}


async def settle(pub: EndpointPublisher, api: SliceApi, key: str = "ns/llm") -> None:
    await pub.reconcile(key)
    seen(pub, api)


async def test_first_reconcile_creates_the_next_writes_nothing() -> None:
    api = SliceApi()
    pub = publisher(api, [pod("a", route_value=route())], [service("llm", selector={"app": "llm"})])
    await settle(pub, api)
    assert [m for m, _ in api.writes] == ["POST"]
    (stored,) = api.slices.values()
    assert stored["endpoints"][0]["addresses"] == ["198.18.7.1"] and stored["ports"][0]["port"] == 38000
    await settle(pub, api)
    await settle(pub, api)
    assert len(api.writes) == 1  # fewest writes: nothing changed, nothing sent


async def test_a_pod_turning_not_ready_updates_and_one_going_away_deletes() -> None:
    api = SliceApi()
    replica = pod("a", route_value=route())
    pods = FakeInformer([replica])
    pub = EndpointPublisher(
        api, NODE, pods=pods, services=FakeInformer([service("llm", selector={"app": "llm"})])
    )  # type: ignore[arg-type]
    await settle(pub, api)
    replica["status"]["conditions"][0]["status"] = "False"
    await settle(pub, api)
    assert [m for m, _ in api.writes] == ["POST", "PUT"]
    (stored,) = api.slices.values()
    assert stored["endpoints"][0]["conditions"]["ready"] is False
    pods.cache.clear()
    await settle(pub, api)
    assert [m for m, _ in api.writes] == ["POST", "PUT", "DELETE"] and not api.slices


async def test_a_reconcile_before_the_informer_saw_our_write_reads_that_write() -> None:
    """Two pods becoming Ready back to back: the second reconcile runs before the slice informer
    has seen the first write. It must neither create the slice again nor PUT with the
    resourceVersion the cache last had (a 409 and a backed-off retry of the whole batch)."""
    api = SliceApi()
    first = pod("a", route_value=route())
    pods = FakeInformer([first])
    pub = EndpointPublisher(
        api, NODE, pods=pods, services=FakeInformer([service("llm", selector={"app": "llm"})])
    )  # type: ignore[arg-type]
    await pub.reconcile("ns/llm")  # no seen(): the informer lags behind
    await pub.reconcile("ns/llm")
    assert [m for m, _ in api.writes] == ["POST"]
    second = pod("b", route_value=route("198.18.7.2"))
    pods.cache["ns/b"] = second
    await pub.reconcile("ns/llm")
    third = pod("c", route_value=route("198.18.7.3"))
    pods.cache["ns/c"] = third
    await pub.reconcile("ns/llm")  # PUT again on the resourceVersion of its own PUT
    assert [m for m, _ in api.writes] == ["POST", "PUT", "PUT"]
    (stored,) = api.slices.values()
    assert sorted(a for e in stored["endpoints"] for a in e["addresses"]) == [
        "198.18.7.1",
        "198.18.7.2",
        "198.18.7.3",
    ]


async def test_a_newer_copy_in_the_cache_wins_over_our_older_write() -> None:
    """Someone changed our slice after our write: once the informer shows that newer copy, the
    publisher compares with it (and sets it right), never with its own stale copy."""
    api = SliceApi()
    pub = publisher(api, [pod("a", route_value=route())], [service("llm", selector={"app": "llm"})])
    await pub.reconcile("ns/llm")
    ((key, stored),) = api.slices.items()
    edited = copy.deepcopy(stored)
    edited["endpoints"] = []
    edited["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 5)
    api.slices[key] = edited
    pub.on_slice("MODIFIED", stored, copy.deepcopy(edited))
    seen(pub, api)
    await pub.reconcile("ns/llm")
    assert [m for m, _ in api.writes] == ["POST", "PUT"]
    assert api.slices[key]["endpoints"][0]["addresses"] == ["198.18.7.1"]


async def test_a_restart_rebuilds_from_the_apiserver_without_rewriting() -> None:
    api = SliceApi()
    pods = [pod("a", route_value=route()), pod("b", route_value=route("198.18.7.2"))]
    services = [service("llm", selector={"app": "llm"})]
    await settle(publisher(api, pods, services), api)
    writes = len(api.writes)
    fresh = publisher(api, pods, services)  # a new process: its informer listed the same slices
    await settle(fresh, api)
    assert len(api.writes) == writes


async def test_slices_of_a_deleted_service_or_one_that_lost_its_selector_are_removed() -> None:
    api = SliceApi()
    services = FakeInformer([service("llm", selector={"app": "llm"})])
    pub = EndpointPublisher(api, NODE, pods=FakeInformer([pod("a", route_value=route())]), services=services)  # type: ignore[arg-type]
    await settle(pub, api)
    services.cache["ns/llm"]["spec"].pop("selector")
    await settle(pub, api)
    assert not api.slices


async def test_events_mark_only_the_services_that_select_the_pod() -> None:
    api = SliceApi()
    llm, other = service("llm", selector={"app": "llm"}), service("other", selector={"app": "else"})
    pub = publisher(api, [], [llm, other])
    pub.on_service("ADDED", None, llm)
    pub.on_service("ADDED", None, other)
    pub._dirty.clear()
    replica = pod("a", route_value=route())
    pub.on_pod("ADDED", None, replica)
    assert pub._dirty == {"ns/llm"}
    pub._dirty.clear()
    status_only = copy.deepcopy(replica)
    status_only["status"]["startTime"] = "now"
    pub.on_pod("MODIFIED", replica, status_only)
    assert pub._dirty == set()  # a status write that changes no endpoint wakes nothing
    relabelled = copy.deepcopy(replica)
    relabelled["metadata"]["labels"] = {"app": "else"}
    pub.on_pod("MODIFIED", replica, relabelled)
    assert pub._dirty == {"ns/llm", "ns/other"}  # leaves one, joins the other


async def test_run_reconciles_every_service_once_synced_and_retries_a_failure() -> None:
    api = SliceApi()
    failing = {"left": 1}
    request = api.request

    async def flaky(method: str, path: str, **kwargs: Any) -> Any:
        if method == "POST" and failing["left"]:
            failing["left"] -= 1
            raise KubeUnavailable(503, "apiserver restarting")
        return await request(method, path, **kwargs)

    api.request = flaky  # type: ignore[method-assign]
    pub = publisher(api, [pod("a", route_value=route())], [service("llm", selector={"app": "llm"})])

    async def slices_run() -> None:  # the informer, already synced (no apiserver here)
        pub.slices.synced.set()
        await asyncio.Event().wait()

    pub.slices.run = slices_run  # type: ignore[method-assign]
    task = asyncio.create_task(pub.run())
    try:
        for _ in range(200):
            if api.slices:
                break
            await asyncio.sleep(0.02)
        assert api.slices and failing["left"] == 0
        (stored,) = api.slices.values()
        assert stored["metadata"]["labels"][LABEL_SERVICE_NAME] == "llm"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
