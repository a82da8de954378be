"""Provider API outages never evict (issue 16 acceptance), on the real control plane with real
fakecloud servers and the whole service in-process.

The test cluster's controller-manager has ``node-monitor-grace-period=10s`` and the pods tolerate
``node.kubernetes.io/unreachable`` for only 5 s, so if the node ever went unreachable during an
outage longer than both, the real node-lifecycle controller would evict them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration.service_support import Running, running_pods, running_service
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.sim.local import cloud_config, inference_deployment

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
TOLERATE_UNREACHABLE_SECONDS = 5
OUTAGE_SECONDS = 10 + TOLERATE_UNREACHABLE_SECONDS + 10  # grace + toleration + margin


def short_toleration_deployment(name: str, node: str, replicas: int) -> JSON:
    manifest = inference_deployment(name, node, replicas)
    spec = manifest["spec"]["template"]["spec"]
    for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"):
        spec["tolerations"].append(
            {
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": TOLERATE_UNREACHABLE_SECONDS,
            }
        )
    return manifest


def condition(obj: JSON, kind: str) -> JSON:
    found = next((c for c in obj["status"].get("conditions") or [] if c["type"] == kind), None)
    assert found is not None, f"no {kind} condition"
    return found


def taint_keys(node: JSON) -> set[str]:
    return {t["key"] for t in node["spec"].get("taints") or []}


async def assert_nothing_evicted_for(svc: Running, namespace: str, uids: set[str], seconds: float) -> None:
    """For ``seconds``: every pod keeps existing, undeleted and not Failed; the node stays Ready
    and never gets the unreachable taint."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pods = await svc.pods(namespace)
        assert {p["metadata"]["uid"] for p in pods} == uids, "a pod was replaced"
        for pod in pods:
            assert not pod["metadata"].get("deletionTimestamp"), f"{pod['metadata']['name']} is being evicted"
            assert pod["status"].get("phase") != "Failed", pod["status"]
        node = await svc.get_node()
        assert condition(node, "Ready")["status"] == "True", condition(node, "Ready")
        assert "node.kubernetes.io/unreachable" not in taint_keys(node)
        await asyncio.sleep(1)


async def record_timeline(svc: Running, started: float, timeline: list[str]) -> None:
    """Every change of the node's conditions, taints and GPUs, for the report (not asserted)."""
    last = None
    while True:
        node = await svc.get_node()
        conds = {c["type"]: f"{c['status']}/{c['reason']}" for c in node["status"].get("conditions") or []}
        seen = (
            conds.get("Ready"),
            conds.get("ProvidersReachable"),
            sorted(taint_keys(node) - {"virtual-kubelet.io/provider"}),
            node["status"]["allocatable"]["nvidia.com/gpu"],
        )
        if seen != last:
            timeline.append(
                f"t={time.monotonic() - started:5.1f}s Ready={seen[0]} ProvidersReachable={seen[1]} "
                f"taints={seen[2]} nvidia.com/gpu={seen[3]}"
            )
            last = seen
        await asyncio.sleep(0.5)


async def test_every_provider_api_down_longer_than_grace_plus_toleration_evicts_nothing(
    cluster: Cluster, namespace: str
) -> None:
    clouds = {
        "cheap": cloud_config("cheap", 1.0, capacity=2),
        "premium": cloud_config("premium", 3.0, capacity=4),
    }
    async with running_service(cluster, clouds) as svc:
        await svc.kube.request(
            "POST",
            f"/apis/apps/v1/namespaces/{namespace}/deployments",
            body=short_toleration_deployment("web", svc.node, 3),
        )
        before = await running_pods(svc, namespace, 3)
        deployed = {name: set(await svc.deployments(name)) for name in svc.clouds}
        assert set().union(*deployed.values()) == set(before)
        creates = {name: (await svc.stats(name)).get("POST /v1/deployments", 0) for name in svc.clouds}

        timeline: list[str] = []
        started = time.monotonic()
        recorder = asyncio.create_task(record_timeline(svc, started, timeline))
        for name in svc.clouds:
            await svc.knobs(name, outage=True)
        timeline.append(f"t={time.monotonic() - started:5.1f}s both provider APIs return 503")

        async def breaker_open() -> JSON | None:
            node = await svc.get_node()
            reach = condition(node, "ProvidersReachable")
            gpus = node["status"]["allocatable"]["nvidia.com/gpu"]
            if (
                reach["reason"] == "ProvidersUnreachable"
                and "vkprovider.io/unavailable" in taint_keys(node)
                and gpus == "0"
            ):
                return node
            return None

        node = await eventually(breaker_open, timeout=30)
        message = condition(node, "ProvidersReachable")["message"]
        assert "cheap (" in message and "premium (" in message

        await assert_nothing_evicted_for(svc, namespace, set(before), OUTAGE_SECONDS)

        for name in svc.clouds:
            await svc.knobs(name, outage=False)
        timeline.append(f"t={time.monotonic() - started:5.1f}s both provider APIs back")

        async def recovered() -> bool:
            node = await svc.get_node()
            return (
                condition(node, "ProvidersReachable")["status"] == "True"
                and "vkprovider.io/unavailable" not in taint_keys(node)
                and node["status"]["allocatable"]["nvidia.com/gpu"] != "0"
            )

        await eventually(recovered, timeout=30)
        await asyncio.sleep(1)  # let the recorder see the recovered node
        recorder.cancel()
        print("\n".join(["outage timeline:", *timeline]))
        assert await running_pods(svc, namespace, 3) == before  # the same pods, all Running
        for name in svc.clouds:
            assert set(await svc.deployments(name)) == deployed[name]  # nothing deleted or moved
            stats = await svc.stats(name)
            assert stats.get("POST /v1/deployments", 0) == creates[name], "a pod was redeployed"
            assert not any(k.startswith("DELETE") for k in stats), stats

        events = await svc.kube.request(
            "GET",
            "/api/v1/namespaces/default/events",
            query={"fieldSelector": f"involvedObject.kind=Node,involvedObject.name={svc.node}"},
        )
        reasons = {e["reason"] for e in events["items"] if e.get("reportingComponent") == "vkprovider"}
        assert {
            "ProviderUnreachable",
            "ProviderReachable",
            "CircuitBreakerOpen",
            "CircuitBreakerClosed",
        } <= reasons


async def test_one_provider_down_new_pods_go_to_the_other_and_old_ones_are_untouched(
    cluster: Cluster, namespace: str
) -> None:
    clouds = {
        "cheap": cloud_config("cheap", 1.0, capacity=4),
        "premium": cloud_config("premium", 3.0, capacity=4),
    }
    async with running_service(cluster, clouds) as svc:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
        await svc.kube.request("POST", path, body=short_toleration_deployment("web", svc.node, 2))
        first = await running_pods(svc, namespace, 2)
        assert set(await svc.deployments("cheap")) == set(first)  # the cheap cloud wins on price

        await svc.knobs("cheap", outage=True)

        async def cheap_unreachable() -> bool:
            reach = condition(await svc.get_node(), "ProvidersReachable")
            return reach["reason"] == "ProviderUnreachable" and reach["message"].startswith(
                "unreachable: cheap"
            )

        await eventually(cheap_unreachable, timeout=30)
        assert "vkprovider.io/unavailable" not in taint_keys(await svc.get_node())  # premium can take pods

        patch = {"spec": {"replicas": 4}}
        await svc.kube.request(
            "PATCH", f"{path}/web", body=patch, content_type="application/merge-patch+json"
        )
        everything = await running_pods(svc, namespace, 4)
        new = set(everything) - set(first)
        assert new and new <= set(await svc.deployments("premium"))
        await assert_nothing_evicted_for(svc, namespace, set(everything), OUTAGE_SECONDS)

        creates = (await svc.stats("cheap")).get("POST /v1/deployments", 0)
        await svc.knobs("cheap", outage=False)

        async def cheap_back() -> bool:
            return condition(await svc.get_node(), "ProvidersReachable")["status"] == "True"

        await eventually(cheap_back, timeout=30)
        assert await running_pods(svc, namespace, 4) == everything
        assert set(await svc.deployments("cheap")) == set(first)  # untouched by the recovery
        assert (await svc.stats("cheap")).get("POST /v1/deployments", 0) == creates
