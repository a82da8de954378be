"""How a sample counts what the apiserver shows, and what a scenario becomes in the API."""

from __future__ import annotations

from typing import Any

from vkprovider.devcluster.kwok import SERVE_THROUGH_GRACE_ANNOTATION
from vkprovider.sim import manifests
from vkprovider.sim.observe import sample_from
from vkprovider.sim.record import LedgerEntry, NodeSample
from vkprovider.sim.scenario import parse_scenario

S = parse_scenario(
    {
        "name": "obs",
        "clock": {"day": "1h", "real_seconds": 60},
        "fleet": {"nodes": 2, "gpus_per_node": 4},
        "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 4}],
        "workloads": [{"name": "chat", "replicas": 3}],
        "timeline": [{"at": "10m", "training": {"name": "train", "gpus": 4, "duration": "20m"}}],
    }
)


def node(
    name: str, *, local: bool = True, ready: bool = True, cordoned: bool = False, taints: Any = ()
) -> Any:
    labels = {"pool": "local-gpu"} if local else {"type": "virtual-kubelet"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": cordoned, "taints": list(taints)},
        "status": {
            "allocatable": {"nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    labels: dict[str, str], node_name: str = "", *, gpus: int = 1, ready: bool = True, **extra: Any
) -> Any:
    return {
        "metadata": {"labels": labels, "annotations": extra.get("annotations", {}), **extra.get("meta", {})},
        "spec": {
            "nodeName": node_name,
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {
            "phase": extra.get("phase", "Running" if node_name else "Pending"),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_sample_counts_local_external_pending_ready_and_training() -> None:
    chat = {"sim.vkprovider.io/workload": "chat"}
    train = {"sim.vkprovider.io/training": "train"}
    pods = [
        pod(chat, "local-gpu-0"),
        pod(chat, "local-gpu-1", ready=False),
        pod(chat, "vk-external", annotations={"vkprovider.io/provider": "cheap"}, meta={"uid": "e1"}),
        pod(chat),  # pending
        pod(chat, "local-gpu-0", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),  # going away
        pod(chat, "vk-external", phase="Failed", meta={"uid": "e2"}),  # finished: not a replica
        pod(train, "local-gpu-1", gpus=4),
        pod(train, gpus=4),
    ]
    nodes = [
        node("local-gpu-0"),
        node("local-gpu-1", cordoned=True),
        node("vk-external", local=False, taints=[{"key": "local-capacity", "effect": "NoSchedule"}]),
    ]
    deployments = [{"metadata": {"name": "chat"}, "spec": {"replicas": 4}}]
    ledger = [
        LedgerEntry("cheap", "u1", "o", 1, 2.0, 100.0, None),
        LedgerEntry("cheap", "u2", "o", 1, 2.0, 100.0, 140.0),
    ]
    x = sample_from(
        S,
        t=150.0,
        pods=pods,
        nodes=nodes,
        deployments=deployments,
        virtual_node="vk-external",
        gate_taint_key="local-capacity",
        ledger=ledger,
    )
    w = x.workloads["chat"]
    assert (w.desired, w.local, w.external, w.pending, w.ready_local, w.ready_external) == (4, 2, 1, 1, 1, 1)
    assert (x.training["train"].running, x.training["train"].pending, x.training["train"].gpus) == (1, 1, 4)
    assert x.local_gpus == 4  # the cordoned node's GPUs are not schedulable
    assert x.local_gpus_used == 1 + 1 + 4
    assert x.cordoned == ["local-gpu-1"]
    assert x.gate_tainted is True
    assert x.external_by_provider == {"cheap": 1}
    # per node, for the ideal: the cordoned node keeps its GPUs and its training pod's
    assert x.nodes["local-gpu-1"] == NodeSample(gpus=4, ready=True, cordoned=True, training_gpus=4)
    assert x.nodes["local-gpu-0"] == NodeSample(gpus=4, ready=True, cordoned=False, training_gpus=0)
    assert w.ready_external_uids == ["e1"]
    assert x.virtual_pod_uids == ["e1", "e2"]  # a finished pod still exists: its deployment is no orphan
    assert x.spend_rate == 2.0  # only the open entry bills at t=150


def test_inference_prefers_local_and_may_burst_but_not_past_the_gate() -> None:
    spec = manifests.inference_deployment(S, S.workloads[0])["spec"]["template"]["spec"]
    tolerations = {t["key"] for t in spec["tolerations"]}
    assert tolerations == {"virtual-kubelet.io/provider"}  # not local-capacity: the gate decides
    preferred = spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["preference"]["matchExpressions"][0]["key"] == "pool"


def test_inference_is_the_vllm_manifest_shape_with_local_storage() -> None:
    """The day's replicas carry vLLM's /dev/shm (memory emptyDir) and a model-cache emptyDir, so
    the return home is exercised on the local storage the Descheduler protects by default."""
    spec = manifests.inference_deployment(S, S.workloads[0])["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
    assert "emptyDir" in volumes["model-cache"]
    mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/dev/shm"] == "shm"


def test_training_runs_locally_at_its_priority() -> None:
    ((_, training),) = S.trainings()
    job = manifests.training_job(S, training, run_seconds=99)
    assert job["spec"]["parallelism"] == 1
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["priorityClassName"] == "sim-training-1000"
    assert pod_spec["nodeSelector"] == {"pool": "local-gpu"}
    assert "tolerations" not in pod_spec
    assert (
        job["spec"]["template"]["metadata"]["annotations"][manifests.COMPLETE_DELAY_ANNOTATION] == "99.000s"
    )
    assert len(manifests.training_pods(S, training)) == 1


def test_fakecloud_config_converts_times_to_real_seconds() -> None:
    config = manifests.fakecloud_config(S, S.providers[0])
    # 10 min startup at 60 simulated seconds per real second
    assert config["lifecycle"]["provisioning_seconds"] == 10.0
    assert config["catalog"][0]["capacity"] == 4


def test_each_workload_has_a_service_that_spreads_over_every_ready_replica() -> None:
    """The day's traffic goes to the Service: it selects the Deployment's pods at their container
    port, and with no trafficDistribution every Ready replica, local or external, takes a share
    (PreferSameZone would idle the billed external replicas while one local replica is Ready)."""
    w = S.workloads[0]
    service = manifests.service(S, w)
    deployment = manifests.inference_deployment(S, w)
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert "trafficDistribution" not in service["spec"]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == template["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert manifests.collection_path(service) == "/api/v1/namespaces/default/services"
    # a preempted local replica serves through its grace (the data path's listener and kwok honour it)
    assert template["metadata"]["annotations"][SERVE_THROUGH_GRACE_ANNOTATION] == "true"
    assert template["spec"]["terminationGracePeriodSeconds"] == manifests.INFERENCE_GRACE_SECONDS


def test_a_provider_round_trip_reaches_its_fakecloud_in_seconds() -> None:
    s = parse_scenario(
        {
            **S.model_dump(mode="json"),
            "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 4, "round_trip_ms": 40}],
        }
    )
    assert manifests.fakecloud_config(s, s.providers[0])["knobs"]["round_trip_seconds"] == 0.04
