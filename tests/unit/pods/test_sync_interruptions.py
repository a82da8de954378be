"""Glitches that must never kill live work or miscount it (issue 22, defects 1, 3, 9 and 10):
one list that omits a running deployment, an Unknown that comes and goes, a running Job pod
deleted with its finalizer (an interrupted pod is no completion), a restart's asynchronous
delete, and a graceful deletion resumed by a new process."""

from __future__ import annotations

from typing import Any

from pod_sync_fakes import World, gpu_pod, world

from vkprovider.models import ContainerState, ContainerStatus, Phase
from vkprovider.pods.context import Requeue

JSON = dict[str, Any]
GRACE = 60.0  # SyncSettings.lost_grace_seconds' default
JOB_FINALIZER = "batch.kubernetes.io/job-tracking"


async def running(w: World, pod: JSON) -> JSON:
    """Deploy ``pod`` and let the provider report it Running; returns the stored pod."""
    stored = w.kube.add_pod(pod)
    await w.run(stored)
    w.cloud.set_phase(stored["metadata"]["uid"], Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(stored)
    shown = w.kube.pod("ns", stored["metadata"]["name"])
    assert shown is not None and shown["status"]["phase"] == "Running"
    return shown


def phase_of(w: World, name: str = "p") -> str:
    shown = w.kube.pod("ns", name)
    assert shown is not None
    return str(shown["status"]["phase"])


def container_of(w: World, name: str = "p") -> JSON:
    shown = w.kube.pod("ns", name)
    assert shown is not None
    (container,) = shown["status"]["containerStatuses"]
    return dict(container)


# ---------------------------------------------------------------- defect 1: lost needs a grace


async def test_one_list_that_omits_a_long_running_deployment_kills_nothing() -> None:
    w = await world()
    pod = await running(w, gpu_pod())
    w.clock.now += 3600  # it has run for an hour
    w.cloud.hidden = {"uid-1"}  # one list misses it
    await w.tracker.poll_once()
    w.cloud.hidden = set()
    verdict = await w.run(pod)
    assert isinstance(verdict, Requeue) and verdict.after >= GRACE - 1e-6  # looked at after the grace
    assert phase_of(w) == "Running" and "ProviderLost" not in w.kube.reasons()
    assert "uid-1" in w.cloud.deployments and w.cloud.deletes == []
    await w.tracker.poll_once()  # the next list shows it: the clock stops
    assert w.tracker.get("uid-1").missing_since is None  # type: ignore[union-attr]
    w.clock.now += 3600
    await w.run(pod)
    assert phase_of(w) == "Running" and "uid-1" in w.cloud.deployments


async def test_a_deployment_missing_from_every_list_but_found_by_get_is_not_lost() -> None:
    w = await world()
    pod = await running(w, gpu_pod())
    w.cloud.hidden = {"uid-1"}  # the list glitches for longer than the grace; get knows better
    await w.tracker.poll_once()
    w.clock.now += GRACE + 1
    await w.tracker.poll_once()
    await w.run(pod)
    assert phase_of(w) == "Running" and "ProviderLost" not in w.kube.reasons()
    assert "uid-1" in w.cloud.deployments and w.cloud.deletes == []


async def test_missing_continuously_for_the_grace_and_not_found_by_get_is_lost() -> None:
    w = await world()
    pod = await running(w, gpu_pod())
    del w.cloud.deployments["uid-1"]
    await w.tracker.poll_once()
    w.clock.now += GRACE / 2
    await w.tracker.poll_once()
    assert isinstance(await w.run(pod), Requeue)  # within the grace
    assert phase_of(w) == "Running"
    w.clock.now += GRACE / 2 + 1
    await w.tracker.poll_once()
    assert await w.run(pod) is None
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Failed"
    assert shown["status"]["reason"] == "ProviderLost"


async def test_the_first_unknown_of_a_long_running_pod_kills_nothing() -> None:
    w = await world()
    pod = await running(w, gpu_pod())
    w.clock.now += 3600  # ran longer than the grace: the Unknown clock must not start at first sight
    w.cloud.set_phase("uid-1", Phase.UNKNOWN)
    await w.tracker.poll_once()
    verdict = await w.run(pod)
    assert isinstance(verdict, Requeue) and verdict.after >= GRACE - 1e-6
    assert phase_of(w) == "Running" and "uid-1" in w.cloud.deployments


async def test_unknown_that_flaps_is_not_continuous_and_kills_nothing() -> None:
    w = await world()
    pod = await running(w, gpu_pod())
    for _ in range(3):  # Unknown for 40 s, Running, Unknown again: never 60 s in a row
        w.cloud.set_phase("uid-1", Phase.UNKNOWN)
        await w.tracker.poll_once()
        await w.run(pod)
        w.clock.now += 40
        w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
        await w.tracker.poll_once()
        await w.run(pod)
    assert phase_of(w) == "Running" and "ProviderLost" not in w.kube.reasons()


async def test_unknown_continuously_for_the_grace_and_by_get_is_lost() -> None:
    w = await world()
    pod = await running(w, gpu_pod())
    w.cloud.set_phase("uid-1", Phase.UNKNOWN)
    await w.tracker.poll_once()
    await w.run(pod)
    w.clock.now += GRACE + 1
    await w.tracker.poll_once()
    assert await w.run(pod) is None
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Failed"
    assert shown["status"]["reason"] == "ProviderLost" and "unknown" in shown["status"]["message"]


# ---------------------------------------------------------------- defect 3: interrupted Job pods


def job_pod() -> JSON:
    pod = gpu_pod(finalizers=[JOB_FINALIZER])
    pod["spec"]["restartPolicy"] = "Never"
    return pod


async def delete_gracefully(w: World, *, disruption: bool = False) -> JSON:
    """Another writer marks the pod (a DisruptionTarget first, as eviction and preemption do)
    and deletes it; returns the stored pod the informer hands over."""
    if disruption:
        shown = w.kube.pod("ns", "p")
        assert shown is not None
        w.kube.update("ns", "p", {"status": {"conditions": [*shown["status"]["conditions"], DISRUPTION]}})
    deleting = {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}
    return w.kube.update("ns", "p", {"metadata": deleting})


DISRUPTION = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


async def test_an_interrupted_job_pod_is_failed_never_succeeded() -> None:
    w = await world()
    await running(w, job_pod())
    informer_copy = await delete_gracefully(w, disruption=True)
    assert await w.sync.sync("ns/p", informer_copy) is None  # the provider stops it at once: gone
    shown = w.kube.pod("ns", "p")
    assert shown is not None, "held by the Job's finalizer"
    assert shown["status"]["phase"] == "Failed"  # a Job must not count it as a completion
    terminated = container_of(w)["state"]["terminated"]
    assert terminated["exitCode"] == 137 and terminated["reason"] == "ContainerStatusUnknown"
    conditions = {c["type"]: c for c in shown["status"]["conditions"]}
    assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"  # kept


async def test_a_job_pod_that_reports_exit_0_while_deleted_is_succeeded() -> None:
    w = await world()
    pod = await running(w, job_pod())
    w.cloud.keep_on_delete = True
    await delete_gracefully(w)
    assert isinstance(await w.run(pod), Requeue)  # draining
    done = ContainerStatus(name="server", state=ContainerState.TERMINATED, exit_code=0)
    w.cloud.set_phase("uid-1", Phase.SUCCEEDED, containers=[done])
    assert await w.run(pod) is None
    assert phase_of(w) == "Succeeded" and container_of(w)["state"]["terminated"]["exitCode"] == 0


async def test_a_job_pod_that_reports_a_failure_while_deleted_keeps_its_exit_code() -> None:
    w = await world()
    pod = await running(w, job_pod())
    w.cloud.keep_on_delete = True
    await delete_gracefully(w)
    await w.run(pod)
    failed = ContainerStatus(name="server", state=ContainerState.TERMINATED, exit_code=3, reason="Error")
    w.cloud.set_phase("uid-1", Phase.FAILED, containers=[failed], reason="Error")
    assert await w.run(pod) is None
    assert phase_of(w) == "Failed" and container_of(w)["state"]["terminated"]["exitCode"] == 3


# ---------------------------------------------------------------- defect 9: one exit, one restart


async def test_an_exit_is_counted_once_while_the_restarts_delete_is_asynchronous() -> None:
    w = await world()
    pod = await running(w, gpu_pod())  # restartPolicy Always
    w.cloud.keep_on_delete = True  # a remote Kubernetes: the delete takes a while
    exited = ContainerStatus(name="server", state=ContainerState.TERMINATED, exit_code=1)
    w.cloud.set_phase("uid-1", Phase.FAILED, containers=[exited])
    await w.tracker.poll_once()
    await w.run(pod)
    assert container_of(w)["restartCount"] == 1
    for _ in range(3):  # the exited deployment is still listed, and still found by get
        await w.tracker.poll_once()
        await w.run(pod)
    assert container_of(w)["restartCount"] == 1
    del w.cloud.deployments["uid-1"]  # the delete completes
    await w.tracker.poll_once()
    await w.run(pod)
    assert "uid-1" in w.cloud.deployments and w.cloud.deployments["uid-1"].phase is Phase.PENDING
    assert container_of(w)["restartCount"] == 1 and phase_of(w) == "Running"
    assert "ProviderLost" not in w.kube.reasons()


# ---------------------------------------------------------------- defect 10: what is left of the grace


async def test_a_resumed_graceful_deletion_sends_what_is_left_of_the_grace() -> None:
    w = await world()
    await running(w, gpu_pod())
    await delete_gracefully(w)  # deletionTimestamp 08:00:30 with a 30 s grace ...
    w.clock.now += 20  # ... and the process restarted 20 s into it
    fresh = await world(kube=w.kube, cloud=w.cloud, clock=w.clock)
    await fresh.tracker.poll_once()
    await fresh.run(w.kube.pod("ns", "p"))
    assert w.cloud.deletes == [("uid-1", 10.0)]
