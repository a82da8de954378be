"""PodSync's per-pod memory: one record per UID, created on first sight, removed by one rule."""

from __future__ import annotations

import pytest
from pod_sync_fakes import gpu_pod, world

from vkprovider.models import Phase
from vkprovider.pods.state import PodStates
from vkprovider.pods.sync import is_relevant_change


def test_a_record_is_retired_only_after_its_deployment_is_deleted() -> None:
    states = PodStates()
    record, new = states.observe("u1", "ns/p")
    assert new and states.observe("u1", "ns/p") == (record, False)
    assert states.gone("ns/p", "u1") == [] and states.gone("ns/p", None) == [record]
    with pytest.raises(ValueError):
        states.retire(record)
    record.deployment_deleted = True
    states.retire(record)
    assert len(states) == 0 and states.key_of("u1") is None and states.uids() == frozenset()


async def test_vanished_pod_keeps_its_record_until_the_delete_succeeds() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    assert "uid-1" in w.cloud.deployments and w.sync.states.uids() == {"uid-1"}
    assert w.sync.key_of("uid-1") == "ns/p"
    del w.kube.pods[("ns", "p")]  # force-deleted: the object is gone
    w.cloud.fail_delete = True
    with pytest.raises(Exception, match="delete timed out"):
        await w.run(None, "ns/p")
    # Still known (so the orphan collector leaves it to us) and retried on the next sync.
    assert w.sync.states.uids() == {"uid-1"} and w.sync.known_uids == {"ns/p": "uid-1"}
    w.cloud.fail_delete = False
    assert await w.run(None, "ns/p") is None
    assert "uid-1" not in w.cloud.deployments
    assert len(w.sync.states) == 0 and w.placer.placed("uid-1") is None


async def test_same_name_new_uid_deletes_the_old_deployment_first() -> None:
    w = await world()
    await w.run(w.kube.add_pod(gpu_pod(uid="old")))
    del w.kube.pods[("ns", "p")]
    await w.run(w.kube.add_pod(gpu_pod(uid="new")))
    assert set(w.cloud.deployments) == {"new"}
    assert w.sync.states.uids() == {"new"}


async def test_records_of_finished_pods_go_once_the_pod_object_is_deleted() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    pod["spec"]["restartPolicy"] = "Never"
    w.kube.pods[("ns", "p")]["spec"]["restartPolicy"] = "Never"
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.SUCCEEDED)
    await w.tracker.poll_once()
    await w.run(pod)
    assert w.kube.pod("ns", "p")["status"]["phase"] == "Succeeded"  # type: ignore[index]
    assert "uid-1" not in w.cloud.deployments  # a finished pod stops billing
    assert w.sync.states.uids() == {"uid-1"}  # the object still exists
    deletes = len(w.cloud.deletes)
    del w.kube.pods[("ns", "p")]
    await w.run(None, "ns/p")
    assert len(w.sync.states) == 0
    assert len(w.cloud.deletes) == deletes  # already deleted: not asked again


async def test_adoption_runs_on_first_sight_even_when_the_tracker_knows_the_pod() -> None:
    # A restarted process: the provider lists the deployment before any pod is reconciled.
    w = await world()
    pod = w.kube.add_pod(
        gpu_pod(
            ownerReferences=[{"uid": "rs-1", "controller": True, "kind": "ReplicaSet", "name": "rs"}],
            annotations={"vkprovider.io/provider": "cheap"},
        )
    )
    await w.cloud.deploy(_request_for(pod))
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True, price_per_hour=1.0)
    await w.tracker.poll_once()
    assert w.tracker.get("uid-1") is not None
    assert w.placer.placed("uid-1") is None
    await w.run(pod)
    assert w.placer.placed("uid-1") == ("cheap", "cheap-h100")
    assert w.placer.budgets.spent("ns") == pytest.approx(1.0)  # the budget share is restored
    assert len(w.cloud.deploys) == 1  # adopted, not redeployed


def _request_for(pod: dict) -> object:  # type: ignore[type-arg]
    from vkprovider.models import Container, DeploymentRequest

    return DeploymentRequest(
        uid=pod["metadata"]["uid"],
        namespace="ns",
        name=pod["metadata"]["name"],
        node_name="vk-test",
        containers=[Container(name="server", image="img:1")],
        gpu_count=1,
        offer_id="cheap-h100",
    )


def test_our_own_annotations_do_not_trigger_a_resync() -> None:
    old = gpu_pod(annotations={"team": "a"})
    ours = gpu_pod(
        annotations={"team": "a", "vkprovider.io/provider": "cheap", "vkprovider.io/placement": "{}"}
    )
    assert not is_relevant_change(old, ours)
    theirs = gpu_pod(annotations={"team": "b"})
    assert is_relevant_change(old, theirs)
    control = gpu_pod(annotations={"team": "a", "vkprovider.io/providers": "premium"})
    assert is_relevant_change(old, control)  # a placement control the user set is relevant


async def test_a_new_process_keeps_counting_restarts_from_what_the_pod_shows() -> None:
    w = await world()
    pod = gpu_pod(annotations={"vkprovider.io/provider": "cheap"})
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "server", "restartCount": 4, "state": {"running": {}}}],
    }
    stored = w.kube.add_pod(pod)
    await w.cloud.deploy(_request_for(stored))
    w.cloud.set_phase("uid-1", Phase.SUCCEEDED)  # the container exited: restartPolicy Always
    await w.tracker.poll_once()
    await w.run(stored)
    shown = w.kube.pod("ns", "p")
    assert shown is not None
    assert shown["status"]["containerStatuses"][0]["restartCount"] == 5  # not back to 1
