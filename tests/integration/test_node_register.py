"""The node agent against the real control plane: registration, Lease, foreign conditions,
re-registration, and recreation of a deleted Node."""

from __future__ import annotations

import pytest

from tests.integration.test_node_fakes import (
    condition,
    delete_node,
    eventually,
    kube_client,
    node,
    node_config,
    running_agent,
    taint_keys,
)
from tests.node_fakes import SwitchableProvider, offer
from vkprovider.devcluster import Cluster
from vkprovider.kube import resources

pytestmark = pytest.mark.cluster


def _providers() -> dict[str, SwitchableProvider]:
    return {
        "cheap": SwitchableProvider("cheap", [offer("cheap", "h100x8", "H100-SXM-80GB", 8, 2)]),
        "dear": SwitchableProvider("dear", [offer("dear", "l4", "L4-24GB", 1, 3)]),
    }


async def test_node_registers_ready_with_labels_taint_capacity_and_a_renewed_lease(cluster: Cluster) -> None:
    cfg = node_config(internal_ip="10.9.8.7", kubelet_port=10260, labels={"team": "inference"})
    async with kube_client(cluster) as kube, running_agent(kube, cfg, _providers()):
        got = await node(kube, cfg.name)
        labels = got["metadata"]["labels"]
        assert labels["type"] == "virtual-kubelet"
        assert labels["kubernetes.io/role"] == "agent"
        assert labels["kubernetes.io/hostname"] == cfg.name
        assert labels["team"] == "inference"
        assert labels["gpu.vkprovider.io/H100-SXM-80GB"] == "true"
        assert labels["gpu.vkprovider.io/L4-24GB"] == "true"
        assert {"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"} in got[
            "spec"
        ]["taints"]
        status = got["status"]
        assert status["capacity"]["nvidia.com/gpu"] == str(8 * 2 + 1 * 3)
        assert status["capacity"]["pods"] == "110"
        assert status["allocatable"] == status["capacity"]
        assert {"type": "InternalIP", "address": "10.9.8.7"} in status["addresses"]
        assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10260
        assert status["nodeInfo"]["kubeletVersion"] == "v1.36.3-vkprovider"
        ready = condition(got, "Ready")
        assert ready is not None and (ready["status"], ready["reason"]) == ("True", "KubeletReady")
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"):
            cond = condition(got, kind)
            assert cond is not None and cond["status"] == "False" and cond["reason"]

        lease = await resources.get_lease(kube, "kube-node-lease", cfg.name)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == cfg.name
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": cfg.name, "uid": got["metadata"]["uid"]}
        ]
        first = lease["spec"]["renewTime"]

        async def renewed() -> bool:
            again = await resources.get_lease(kube, "kube-node-lease", cfg.name)
            return again is not None and again["spec"]["renewTime"] > first

        await eventually(renewed, timeout=20)

        heartbeat = ready["lastHeartbeatTime"]

        async def heartbeat_moved() -> bool:
            cond = condition(await node(kube, cfg.name), "Ready")
            return cond is not None and cond["lastHeartbeatTime"] > heartbeat

        await eventually(heartbeat_moved, timeout=20)
        # Heartbeats move, the transition stays: Ready never flipped.
        now_ready = condition(await node(kube, cfg.name), "Ready")
        assert now_ready is not None and now_ready["lastTransitionTime"] == ready["lastTransitionTime"]


async def test_foreign_condition_label_and_taint_survive_updates_and_re_registration(
    cluster: Cluster,
) -> None:
    cfg = node_config()
    providers = _providers()
    async with kube_client(cluster) as kube:
        try:
            async with running_agent(kube, cfg, providers, cleanup=False):
                await resources.patch_node_status(
                    kube,
                    cfg.name,
                    {"conditions": [{"type": "ExampleCondition", "status": "True", "reason": "Example"}]},
                )
                await resources.patch_node(kube, cfg.name, {"metadata": {"labels": {"someone.else/x": "y"}}})
                base = condition(await node(kube, cfg.name), "Ready")
                assert base is not None

                async def two_heartbeats_later() -> bool:
                    got = await node(kube, cfg.name)
                    ready = condition(got, "Ready")
                    assert condition(got, "ExampleCondition") is not None, "foreign condition clobbered"
                    return ready is not None and ready["lastHeartbeatTime"] > base["lastHeartbeatTime"]

                await eventually(two_heartbeats_later, timeout=20)

            # A restart: the Node exists; the new agent updates it in place. One GPU type is gone.
            providers["dear"].catalog = []
            uid = (await node(kube, cfg.name))["metadata"]["uid"]
            async with running_agent(kube, cfg, providers, cleanup=False):
                got = await node(kube, cfg.name)
                assert got["metadata"]["uid"] == uid
                assert condition(got, "ExampleCondition") is not None
                labels = got["metadata"]["labels"]
                assert labels["someone.else/x"] == "y"
                assert "gpu.vkprovider.io/L4-24GB" not in labels
                assert labels["gpu.vkprovider.io/H100-SXM-80GB"] == "true"
                assert got["status"]["capacity"]["nvidia.com/gpu"] == "16"
                assert taint_keys(got).count("virtual-kubelet.io/provider") == 1
        finally:
            await delete_node(kube, cfg.name)


async def test_deleted_node_is_recreated_and_the_lease_follows_the_new_uid(cluster: Cluster) -> None:
    cfg = node_config()
    async with kube_client(cluster) as kube, running_agent(kube, cfg, _providers()) as agent:
        old_uid = (await node(kube, cfg.name))["metadata"]["uid"]
        await kube.request("DELETE", f"/api/v1/nodes/{cfg.name}")

        async def recreated() -> bool:
            got = await resources.get_node(kube, cfg.name)
            return got is not None and got["metadata"]["uid"] != old_uid

        await eventually(recreated, timeout=30)
        got = await node(kube, cfg.name)
        new_uid = got["metadata"]["uid"]
        assert got["metadata"]["labels"]["type"] == "virtual-kubelet"
        assert "virtual-kubelet.io/provider" in taint_keys(got)
        assert agent.node.creations >= 1

        async def lease_owned_by_new_node() -> bool:
            lease = await resources.get_lease(kube, "kube-node-lease", cfg.name)
            if lease is None:
                return False
            owners = lease["metadata"].get("ownerReferences") or []
            return [o["uid"] for o in owners] == [new_uid]

        await eventually(lease_owned_by_new_node, timeout=30)
