"""Training through Kueue in a simulated day: the scenario field, the Jobs it becomes, deploy/kueue's
objects, the admission record read from the apiserver's objects, the gang invariant and the
report's admission section (all pure; the end-to-end run is tests/integration/test_simulation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from vkprovider.config import Settings
from vkprovider.sim import kueue, manifests, report
from vkprovider.sim.invariants import gang_violations, invariants
from vkprovider.sim.observe import sample_from
from vkprovider.sim.record import Admission, Recording, Sample, TrainingSample, WorkloadSample
from vkprovider.sim.scenario import Scenario, ScenarioError, TrainingSubmission, parse_scenario
from vkprovider.sim.service_config import serve_config
from vkprovider.sim.timeline import sample_changes
from vkprovider.sim.world import World

JSON = dict[str, Any]
T0 = 1_800_000_000.0


def scenario(**training: Any) -> Scenario:
    return parse_scenario(
        {
            "name": "kq",
            "clock": {"day": "10h", "real_seconds": 10},
            "fleet": {"nodes": 2, "gpus_per_node": 4},
            "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 4}],
            "workloads": [{"name": "chat", "replicas": 2}],
            "training": {"via": "kueue", **training},
            "timeline": [
                {"at": "1h", "training": {"name": "a", "gpus": 8, "gpus_per_pod": 4, "duration": "3h"}},
                {"at": "2h", "training": {"name": "b", "gpus": 4, "gpus_per_pod": 4, "duration": "1h"}},
            ],
        }
    )


def stamp(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(T0 + t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(name: str, created: float) -> JSON:
    return {
        "metadata": {
            "name": name,
            "labels": {manifests.TRAINING_LABEL: name},
            "creationTimestamp": stamp(created),
        }
    }


def workload(name: str, **conditions: float) -> JSON:
    return {
        "metadata": {"name": f"job-{name}-x", "ownerReferences": [{"kind": "Job", "name": name}]},
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": stamp(t)}
                for kind, t in conditions.items()
            ]
        },
    }


def pod(name: str, created: float, node: str = "local-gpu-0") -> JSON:
    return {
        "metadata": {
            "name": f"{name}-0",
            "labels": {manifests.TRAINING_LABEL: name},
            "creationTimestamp": stamp(created),
        },
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"nvidia.com/gpu": "4"}}}]},
        "status": {"phase": "Running"},
    }


def test_the_scenario_field_is_validated_naming_the_field() -> None:
    assert scenario().training.kueue and not parse_scenario({**base(), "training": {}}).training.kueue
    with pytest.raises(ScenarioError, match=r"training\.via: Input should be 'job' or 'kueue'"):
        parse_scenario({**base(), "training": {"via": "slurm"}})
    with pytest.raises(ScenarioError, match=r"timeline\.0\.training\.gpus: 8 exceed the queue's quota"):
        scenario(reserve_gpus=2)


def base() -> JSON:
    return scenario().model_dump(mode="json", exclude={"training"})


def test_a_kueue_job_is_suspended_in_the_local_queue_and_runs_its_duration() -> None:
    s = scenario()
    a = s.trainings()[0][1]
    body = manifests.training_job(s, a, run_seconds=3.0)
    assert body["metadata"]["namespace"] == kueue.NAMESPACE
    assert body["metadata"]["labels"][kueue.QUEUE_LABEL] == kueue.LOCAL_QUEUE
    assert body["metadata"]["labels"][kueue.PRIORITY_LABEL] == kueue.WORKLOAD_PRIORITY_CLASS
    assert body["spec"]["suspend"] is True and body["spec"]["parallelism"] == 2
    plain = parse_scenario(base())
    assert kueue.QUEUE_LABEL not in manifests.training_job(plain, a, run_seconds=3.0)["metadata"]["labels"]
    # through Kueue nothing ends the Job on schedule: it completes when its pods have run
    labels = [step.label for step in World(s, kube=None, clouds={}, real_jobs=True).steps()]  # type: ignore[arg-type]
    assert labels == ["training a arrives", "training b arrives"]


def test_the_objects_are_deploy_kueues_and_match_the_names_the_sim_uses() -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in kueue.deploy_objects()}
    local_queue = objects[("LocalQueue", kueue.LOCAL_QUEUE)]
    assert local_queue["metadata"]["namespace"] == kueue.NAMESPACE
    assert local_queue["spec"]["clusterQueue"] == kueue.CLUSTER_QUEUE
    assert objects[("ResourceFlavor", kueue.FLAVOR)]["spec"]["nodeLabels"] == {"pool": "local-gpu"}
    assert ("WorkloadPriorityClass", kueue.WORKLOAD_PRIORITY_CLASS) in objects
    assert kueue.queue_gpus(objects[("ClusterQueue", kueue.CLUSTER_QUEUE)]) == 16
    assert all(manifests.collection_path(o).startswith(("/api/", "/apis/")) for o in objects.values())


def test_serve_runs_the_quota_sync_leader_elected() -> None:
    submission = TrainingSubmission(via="kueue", reserve_gpus=1, quota_sync_seconds=3)
    s = scenario().model_copy(update={"training": submission})
    config = serve_config(s, {"cheap": "http://127.0.0.1:1"}, kueue.DEPLOY_DIR, 10255)
    assert config["leader_election"]["enabled"] is True
    assert config["quota"]["cluster_queue"] == kueue.CLUSTER_QUEUE
    assert config["quota"]["reserve"] == {"nvidia.com/gpu": "1"}
    assert Settings(**config).quota is not None
    assert "quota" not in serve_config(parse_scenario(base()), {}, kueue.DEPLOY_DIR, 10255)


def test_admission_records_keep_the_earliest_reading_of_each_step() -> None:
    records = {"a": Admission("a", 8), "b": Admission("b", 4)}
    kueue.update(
        records,
        [job("a", 0), job("b", 1)],
        [workload("a", Admitted=0), workload("b")],
        [pod("a", 0)],
        manifests.TRAINING_LABEL,
    )
    kueue.update(
        records,
        [job("b", 1)],  # "a" was deleted meanwhile: its record stays
        [workload("b", Admitted=5)],
        [pod("b", 6), pod("b", 5)],
        manifests.TRAINING_LABEL,
    )
    kueue.update(
        records, [job("b", 1)], [workload("b", Admitted=9, Finished=9)], [], manifests.TRAINING_LABEL
    )
    a, b = records["a"], records["b"]
    assert (a.created, a.admitted, a.first_pod, a.finished) == (T0, T0, T0, None)
    assert (b.created, b.admitted, b.first_pod, b.finished) == (T0 + 1, T0 + 5, T0 + 5, T0 + 9)


def test_samples_show_each_jobs_queue_state_and_the_quota() -> None:
    s = scenario()
    queue = {
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {"name": "local-gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
                    ]
                }
            ]
        }
    }
    x = sample_from(
        s,
        t=T0,
        pods=[pod("a", 0)],
        nodes=[],
        deployments=[],
        virtual_node="vk",
        gate_taint_key="k",
        jobs=[job("a", 0), job("b", 1)],
        kueue_workloads=[workload("a", Admitted=0), workload("b")],
        cluster_queue=queue,
    )
    assert (x.training["a"].state, x.training["b"].state, x.queue_gpus) == ("admitted", "queued", 8)
    later = Sample(
        t=T0 + 1,
        training={"a": TrainingSample(state="finished"), "b": TrainingSample(state="admitted")},
        queue_gpus=4,
    )
    changes = {(c.kind, c.subject, c.detail) for c in sample_changes(x, later)}
    assert ("admission", "b", "Kueue: queued -> admitted") in changes
    assert ("quota", "ClusterQueue", "local GPUs 8->4") in changes


def test_a_pod_before_admission_or_while_queued_breaks_the_gang() -> None:
    queued = Sample(t=T0 + 2, training={"b": TrainingSample(pending=1, state="queued")})
    clean = [Admission("a", 8, T0, T0 + 1, T0 + 1, T0 + 5)]
    assert gang_violations([], clean) == []
    early = [Admission("a", 8, T0, T0 + 3, T0 + 1, None)]
    assert gang_violations([], early) == ["a: first pod created 2s before admission"]
    assert gang_violations([queued], [Admission("b", 4, T0, None, None)]) == [
        "b: pods seen in 1 samples while queued"
    ]


def recording() -> Recording:
    s = scenario()
    chat = WorkloadSample(desired=2, local=2, ready_local=2)
    samples = [
        Sample(t=T0 + t, workloads={"chat": chat}, queue_gpus=q) for t, q in ((0, 8), (1, 8), (3, 4), (5, 8))
    ]
    return Recording(
        scenario=s.model_dump(mode="json"),
        day_start=T0,
        day_end=T0 + 10,
        end=T0 + 11,
        samples=samples,
        admissions=[
            Admission("a", 8, T0 + 1, T0 + 1, T0 + 1, T0 + 4),
            Admission("b", 4, T0 + 2, T0 + 4, T0 + 4, T0 + 5),
        ],
        components={"gate": True, "descheduler": True, "kueue": True},
    )


def test_the_report_shows_the_admission_timeline_and_the_quota() -> None:
    rec = recording()
    md = report.markdown(rec)
    assert "## Training admission (Kueue)" in md
    # b arrived at 02:00, waited two hours while a ran, admitted when a finished at 04:00
    assert "| b | 4 | 02:00 | 04:00 | 04:00 | 05:00 | 02:00 | a ran |" in md
    assert "| a | 8 | 01:00 | 01:00 | 01:00 | 04:00 | 00:00 | — |" in md
    assert "8 GPUs at 00:00 → 4 GPUs at 03:00 → 8 GPUs at 05:00" in md
    assert (
        "gang admission (no training pod before its Job was admitted, none while queued): **0** violations"
        in md
    )
    summary = report.summary(rec)
    assert [a["queued_behind"] for a in summary["admissions"]] == [[], ["a"]]
    assert summary["invariants"]["gang"] == []
    assert invariants(scenario(), rec.samples, [], {}, [], rec.admissions).ok


def test_a_recording_with_admissions_round_trips(tmp_path: Any) -> None:
    rec = recording()
    rec.save(tmp_path / "r.json")
    again = Recording.load(tmp_path / "r.json")
    assert again.admissions == rec.admissions
    assert [x.queue_gpus for x in again.samples] == [8, 8, 4, 8]
