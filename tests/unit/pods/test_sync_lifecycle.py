"""PodSync decisions against a fake API server and a real in-memory provider: missing refs,
graceful deletion, provider outages, conditions other writers own, and the write count."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from pod_sync_fakes import NODE, gpu_pod, world

from vkprovider.models import Phase
from vkprovider.pods.context import Requeue
from vkprovider.pods.sync import SyncSettings

JSON = dict[str, Any]
SECRET_ENV = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]


def waiting_of(pod: JSON) -> JSON:
    (container,) = pod["status"]["containerStatuses"]
    return dict(container["state"]["waiting"])


async def test_missing_secret_keeps_the_pod_pending_and_it_starts_once_the_secret_exists() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod(env=SECRET_ENV))
    assert await w.run(pod) == Requeue(backoff=True)
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Pending"
    waiting = waiting_of(shown)
    assert waiting["reason"] == "CreateContainerConfigError" and '"hf"' in waiting["message"]
    assert "MandatorySecretNotFound" in w.kube.reasons()
    assert not w.cloud.deployments  # nothing deployed half-way
    w.objects.secrets["hf"] = {"token": b"s3cret"}
    await w.run(pod)
    assert "uid-1" in w.cloud.deployments
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    running = w.kube.pod("ns", "p")
    assert running is not None and running["status"]["phase"] == "Running"


async def test_waiting_for_placement_shows_the_reason_in_the_containers() -> None:
    w = await world()
    w.cloud.catalog = []
    await w.placer.refresh()
    pod = w.kube.add_pod(gpu_pod())
    assert await w.run(pod) == Requeue(backoff=True)
    shown = w.kube.pod("ns", "p")
    assert shown is not None
    assert shown["status"]["reason"] == "NoCandidates"
    assert waiting_of(shown)["reason"] == "NoCandidates"  # what kubectl prints as STATUS


async def test_a_failed_pod_shows_terminated_containers() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    w.kube.pods[("ns", "p")]["spec"] = pod["spec"]
    await w.run(pod)
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Failed", shown["status"]
    (container,) = shown["status"]["containerStatuses"]
    terminated = container["state"]["terminated"]
    assert terminated["reason"] == shown["status"]["reason"] and terminated["exitCode"] == 137


async def test_create_writes_status_without_a_conflict() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)  # the informer's copy is older than the annotation patch
    assert w.kube.count("PATCH", "/status", status=409) == 0
    assert w.kube.count("GET", "/pods/p") == 0
    assert w.kube.count("PATCH", "/status") == 1


async def test_bound_to_running_is_one_status_write_carrying_the_annotations_and_one_event() -> None:
    w = await world()
    w.cloud.run_at_once = True  # the provider answers Running and ready at once
    pod = w.kube.add_pod(gpu_pod())
    assert await w.run(pod) is None
    calls = [(method, path.rsplit("/", 1)[-1]) for method, path, _ in w.kube.calls]
    assert calls == [("POST", "events"), ("PATCH", "status")]  # no separate metadata patch
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Running"
    assert {c["type"]: c["status"] for c in shown["status"]["conditions"]}["Ready"] == "True"
    annotations = shown["metadata"]["annotations"]
    assert annotations["vkprovider.io/provider"] == "cheap"
    assert annotations["vkprovider.io/offer"] == "cheap-h100"
    assert annotations["vkprovider.io/images"] == "server=img:1" and "vkprovider.io/placement" in annotations
    assert w.kube.reasons() == ["ProviderCreateSuccess"]


async def test_annotations_are_patched_on_their_own_when_no_status_write_follows() -> None:
    w = await world()
    w.cloud.run_at_once = True
    pod = w.kube.add_pod(gpu_pod())
    w.kube.pods[("ns", "p")]["status"] = {}  # nothing changes what build_status would write ...
    w.tracker.forget("uid-1")
    original = w.sync.writer.write

    async def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no status write expected")

    # ... because the provider is unreachable: the pod keeps what it shows, annotations still land.
    w.cloud.fail_list = True
    await w.tracker.poll_once()
    w.sync.writer.write = refuse  # type: ignore[method-assign]
    try:
        await w.run(pod)
    finally:
        w.sync.writer.write = original  # type: ignore[method-assign]
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["metadata"]["annotations"]["vkprovider.io/provider"] == "cheap"
    assert w.kube.count("PATCH", "/pods/p") == 1 and w.kube.count("PATCH", "/status") == 0


async def test_conditions_other_writers_own_survive_our_status_writes() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    gate = {"type": "example.com/warm", "status": "False"}
    w.kube.update(
        "ns",
        "p",
        {"status": {"conditions": [*w.kube.pods[("ns", "p")]["status"]["conditions"], disruption, gate]}},
    )
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Running"
    types = {c["type"]: c for c in shown["status"]["conditions"]}
    assert types["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"
    assert "example.com/warm" in types and types["Ready"]["status"] == "True"


KUBELET_LIKE = SyncSettings(node_name=NODE, host_ip="127.0.0.1", status_before_delete=True)


async def test_graceful_deletion_passes_the_grace_waits_and_writes_terminated_states() -> None:
    w = await world(settings=KUBELET_LIKE)
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    w.cloud.keep_on_delete = True  # a provider that drains before it stops
    w.kube.update(
        "ns",
        "p",
        {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}},
    )
    verdict = await w.run(pod)
    assert w.cloud.deletes == [("uid-1", 30.0)]
    assert isinstance(verdict, Requeue) and not verdict.backoff and verdict.after > 0  # no blocked worker
    assert w.kube.pod("ns", "p") is not None  # still draining
    w.cloud.set_phase("uid-1", Phase.SUCCEEDED)  # the provider reports it stopped
    assert await w.run(pod) is None
    assert w.kube.pod("ns", "p") is None
    written = [
        c for c in w.kube.calls if c[0] == "PATCH" and c[1].endswith("/status")
    ]  # the last status write happened before the delete
    assert written and w.kube.calls[-1][0] == "DELETE"
    assert len(w.cloud.deletes) == 1  # not asked twice


async def test_graceful_deletion_is_one_event_and_the_delete_when_nothing_outlives_it() -> None:
    w = await world()  # the default
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    before = len(w.kube.calls)
    w.kube.update(
        "ns",
        "p",
        {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}},
    )
    assert await w.run(pod) is None
    calls = [(method, path.rsplit("/", 1)[-1]) for method, path, _ in w.kube.calls[before:]]
    assert calls == [("POST", "events"), ("DELETE", "p")]  # no status write a moment before
    assert w.kube.reasons()[-1] == "ProviderDeleteSuccess"
    assert w.kube.pod("ns", "p") is None and w.cloud.deletes == [("uid-1", 30.0)]


async def test_a_finalizer_added_during_deletion_still_gets_the_terminated_states() -> None:
    w = await world(settings=SyncSettings(node_name=NODE, host_ip="127.0.0.1", status_before_delete=False))
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    deleting = {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}
    stale = w.kube.update("ns", "p", {"metadata": deleting})
    w.kube.update("ns", "p", {"metadata": {"finalizers": ["example.com/keep"]}})  # after our read
    await w.sync.sync("ns/p", stale)  # the informer's copy has no finalizer yet
    held = w.kube.pod("ns", "p")
    assert held is not None and held["status"]["phase"] == "Running"  # held by the finalizer
    await w.run(pod)  # the object is still there: its outcome is written now
    shown = w.kube.pod("ns", "p")
    # Gone without an exit code: interrupted, never a success (issue 22 defect 3).
    assert shown is not None and shown["status"]["phase"] == "Failed"
    (container,) = shown["status"]["containerStatuses"]
    assert "terminated" in container["state"]
    assert w.kube.count("DELETE", "/pods/p") == 1  # not deleted twice


async def test_a_pod_held_by_a_finalizer_gets_its_outcome_written_once() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    w.kube.update("ns", "p", {"metadata": {"finalizers": ["example.com/keep"]}})
    deleting = {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}
    stale = w.kube.update("ns", "p", {"metadata": deleting})
    assert await w.sync.sync("ns/p", stale) is None
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Failed"  # the keeper sees the end
    (container,) = shown["status"]["containerStatuses"]
    assert "terminated" in container["state"]
    writes = w.kube.count("PATCH", "/pods/p/status")
    await w.sync.sync("ns/p", stale)  # a stale copy (still Running) comes round again
    await w.run(shown)
    assert w.kube.count("PATCH", "/pods/p/status") == writes  # a terminal pod is never written twice
    assert w.kube.count("DELETE", "/pods/p") == 1


async def test_graceful_deletion_records_terminated_containers_before_the_delete() -> None:
    w = await world(settings=KUBELET_LIKE)
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    seen: list[JSON] = []
    original = w.kube._handle

    def spy(method: str, path: str, body: Any) -> Any:
        if method == "DELETE" and "/pods/" in path:
            seen.append(w.kube.pods[("ns", "p")])
        return original(method, path, body)

    w.kube._handle = spy  # type: ignore[method-assign]
    w.kube.update(
        "ns",
        "p",
        {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}},
    )
    assert await w.run(pod) is None  # the memory provider stops at once: no wait
    (last,) = seen
    (container,) = last["status"]["containerStatuses"]
    # The memory provider drops it without an exit code: an interrupted pod, Failed.
    assert "terminated" in container["state"] and last["status"]["phase"] == "Failed"


async def test_deleting_a_pod_with_nothing_deployed_deletes_it_at_once() -> None:
    w = await world()
    w.cloud.catalog = []
    await w.placer.refresh()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.kube.update(
        "ns",
        "p",
        {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}},
    )
    assert await w.run(pod) is None
    assert w.kube.pod("ns", "p") is None and w.cloud.deletes == []


async def test_unreachable_provider_keeps_the_status_and_adds_a_condition_never_lost() -> None:
    settings = SyncSettings(node_name=NODE, host_ip="127.0.0.1", unreachable_grace_seconds=10)
    w = await world(settings=settings)
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    w.cloud.fail_list = True
    w.changed.clear()
    await w.tracker.poll_once()
    assert w.tracker.unreachable_since("cheap") is not None
    assert w.changed == ["uid-1"]  # the API went away: its pods are looked at
    verdict = await w.run(pod)
    assert isinstance(verdict, Requeue) and verdict.after >= 10 - 1e-6  # within the grace
    w.clock.now += 3600  # far beyond lost_grace_seconds too
    await w.tracker.poll_once()
    for _ in range(3):
        assert await w.run(pod) is None
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Running"
    conditions = {c["type"]: c for c in shown["status"]["conditions"]}
    reach = conditions["vkprovider.io/ProviderReachable"]
    assert reach["status"] == "False" and "cheap" in reach["message"]
    assert conditions["Ready"]["status"] == "True"  # last observed status kept
    assert w.kube.reasons().count("ProviderUnreachable") == 1  # one Event
    assert "ProviderLost" not in w.kube.reasons()
    # The API answers again, with the deployment still there: the condition clears.
    w.cloud.fail_list = False
    w.changed.clear()
    await w.tracker.poll_once()
    assert w.changed == ["uid-1"]  # ...and came back
    assert await w.run(pod) is None
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Running"
    reach = {c["type"]: c for c in shown["status"]["conditions"]}["vkprovider.io/ProviderReachable"]
    assert reach["status"] == "True"
    assert "uid-1" in w.cloud.deployments and len(w.cloud.deploys) == 1


async def test_a_reachable_provider_saying_gone_marks_the_pod_lost() -> None:
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    del w.cloud.deployments["uid-1"]  # lost on the provider's side
    await w.tracker.poll_once()
    w.clock.now += 3600
    await w.run(pod)
    shown = w.kube.pod("ns", "p")
    assert shown is not None and shown["status"]["phase"] == "Failed"
    assert shown["status"]["reason"] == "ProviderLost"


async def test_deleting_after_a_restart_asks_the_provider_the_pod_names() -> None:
    # The provider's list failed since the restart: only the pod's annotation says where it runs.
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    assert "uid-1" in w.cloud.deployments
    w.cloud.fail_list = True
    fresh = await world(kube=w.kube, cloud=w.cloud)  # a new process, same provider and objects
    await fresh.tracker.poll_once()
    assert fresh.tracker.get("uid-1") is None
    w.cloud.fail_list = False
    w.kube.update(
        "ns",
        "p",
        {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}},
    )
    assert await fresh.run(pod) is None
    assert w.cloud.deletes == [("uid-1", 30.0)] and "uid-1" not in w.cloud.deployments
    assert w.kube.pod("ns", "p") is None


async def test_ready_taken_away_by_another_writer_is_written_back() -> None:
    """The node-lifecycle controller sets Ready=False on a NotReady node's pods; once the node is
    back, the provider's truth (serving) must reach the pod again."""
    from vkprovider.pods.podview import is_relevant_change

    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(w.kube.pod("ns", "p") or pod)
    ready = w.kube.pod("ns", "p")
    assert ready is not None
    marked = copy.deepcopy(ready)
    for condition in marked["status"]["conditions"]:
        if condition["type"] in ("Ready", "ContainersReady"):
            condition["status"] = "False"
    assert is_relevant_change(ready, marked)  # a status-only change, but one we must answer
    assert not is_relevant_change(marked, ready)  # our own write back is not re-queued again
    w.kube.pods[("ns", "p")]["status"] = marked["status"]
    await w.run(w.kube.pod("ns", "p") or marked)
    shown = w.kube.pod("ns", "p")
    assert shown is not None
    ready_now = {c["type"]: c["status"] for c in shown["status"]["conditions"]}
    assert ready_now["Ready"] == "True" and ready_now["ContainersReady"] == "True"


async def test_each_deploy_and_delete_leaves_one_incident_line(caplog: pytest.LogCaptureFixture) -> None:
    """On call builds the incident timeline from these lines: pod, UID, provider, offer, outcome."""
    caplog.set_level(logging.INFO, logger="vkprovider.pods")
    w = await world()
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    w.kube.update(
        "ns",
        "p",
        {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 0}},
    )
    await w.run(pod)
    lines = [
        (r.getMessage(), getattr(r, "outcome", None), getattr(r, "provider", None)) for r in caplog.records
    ]
    deploys = [r for r in caplog.records if r.getMessage() == "deploy"]
    assert len(deploys) == 1
    assert (deploys[0].pod, deploys[0].uid, deploys[0].provider) == ("ns/p", "uid-1", "cheap")  # type: ignore[attr-defined]
    assert deploys[0].offer and deploys[0].outcome == "ok"  # type: ignore[attr-defined]
    assert ("delete", "ok", "cheap") in lines


async def _two_pods_running(kube_drops: bool) -> tuple[Any, list[JSON]]:
    w = await world()
    w.kube.status_drops_metadata = kube_drops
    pods = [w.kube.add_pod(gpu_pod(name, uid)) for name, uid in (("a", "uid-a"), ("b", "uid-b"))]
    for pod in pods:
        await w.run(pod)
        w.cloud.set_phase(pod["metadata"]["uid"], Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    for pod in pods:
        await w.run(pod)
    shown = [w.kube.pod("ns", name) for name in ("a", "b")]
    assert all(p is not None and p["status"]["phase"] == "Running" for p in shown)
    return w, [p for p in shown if p is not None]


async def test_the_status_answer_is_read_until_it_shows_our_annotations_kept() -> None:
    w, shown = await _two_pods_running(kube_drops=False)
    for pod in shown:
        assert pod["metadata"]["annotations"]["vkprovider.io/provider"] == "cheap"
    # the first annotated status write is checked; once it showed them kept, no answer is read
    decodes = w.kube.annotated_status_decodes
    assert decodes[0] is True and len(decodes) >= 2 and not any(decodes[1:]), decodes
    assert w.kube.count("PATCH", "/pods/a") == w.kube.count("PATCH", "/pods/b") == 0  # no metadata patch


async def test_an_apiserver_that_drops_them_gets_a_metadata_patch_every_time() -> None:
    w, shown = await _two_pods_running(kube_drops=True)
    for pod in shown:
        assert pod["metadata"]["annotations"]["vkprovider.io/provider"] == "cheap"
    decodes = w.kube.annotated_status_decodes
    assert decodes and all(decodes), decodes
    assert w.kube.count("PATCH", "/pods/a") >= 1 and w.kube.count("PATCH", "/pods/b") >= 1
