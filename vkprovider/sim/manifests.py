"""The Kubernetes objects a scenario becomes: inference Deployments (+PDB, HPA), training Jobs,
their PriorityClasses, and the serve / fakecloud configs of the providers.

Inference prefers the local pool (preferred node affinity) and tolerates the virtual node's
provider taint but *not* the gate's ``local-capacity`` taint, so the gate decides whether new
replicas may burst out and the Descheduler brings them home (DESIGN.md §1, §8). Training does
not tolerate the virtual node at all: it only ever runs locally, at a higher priority, and so
preempts inference.
"""

from __future__ import annotations

from typing import Any

# kwok stage delays (dev clusters with pod delays or Kueue): a local replica takes
# ``fleet.ready_after`` to become Ready, a training pod completes after its run.
from vkprovider.devcluster.kwok import (
    COMPLETE_DELAY_ANNOTATION,
    READY_DELAY_ANNOTATION,
    SERVE_THROUGH_GRACE_ANNOTATION,
)
from vkprovider.sim.kueue import LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, WORKLOAD_PRIORITY_CLASS
from vkprovider.sim.kueue import NAMESPACE as KUEUE_NAMESPACE
from vkprovider.sim.scenario import ProviderSpec, Scenario, Training, Workload

JSON = dict[str, Any]

WORKLOAD_LABEL = "sim.vkprovider.io/workload"
TRAINING_LABEL = "sim.vkprovider.io/training"
POOL_LABEL, POOL_VALUE = "pool", "local-gpu"
GPU = "nvidia.com/gpu"
#: the inference server's port (vLLM's), and the Service's
CONTAINER_PORT, SERVICE_PORT = 8000, 80
#: an inference replica's grace period (real seconds): an external one drains this long, its
#: endpoint terminating, before its deployment is stopped (capped by traffic.drain_max_seconds)
INFERENCE_GRACE_SECONDS = 5
#: the zone label the sim gives every local (kwok) node, so kube-proxy honours the Services' zone
#: hints (it ignores them unless every Ready endpoint has one and its own node has a zone)
LOCAL_ZONE = "local-a"
#: The HPAs' scale-down stabilization, in real seconds (a few metrics-server resolutions)
HPA_SCALE_DOWN_WINDOW_SECONDS = 20


_PLURALS = {
    "Deployment": "deployments",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "HorizontalPodAutoscaler": "horizontalpodautoscalers",
    "Job": "jobs",
    "PriorityClass": "priorityclasses",
    "Namespace": "namespaces",
    "Pod": "pods",
    "Service": "services",
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}


def collection_path(obj: JSON) -> str:
    """The collection path of ``obj`` (``/apis/apps/v1/namespaces/ns/deployments``)."""
    group_version = obj["apiVersion"]
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = _PLURALS[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


def go_duration(seconds: float) -> str:
    return f"{max(0.0, seconds):.3f}s"


def priority_class_name(value: int) -> str:
    return f"sim-training-{value}"


def priority_class(value: int) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(value)},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "simulated training: preempts inference (priority 0) on local GPUs",
    }


def inference_deployment(s: Scenario, w: Workload) -> JSON:
    labels = {"app": w.name, WORKLOAD_LABEL: w.name}
    local = {"key": POOL_LABEL, "operator": "In", "values": [POOL_VALUE]}
    virtual = {"key": "type", "operator": "In", "values": ["virtual-kubelet"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": w.name, "namespace": s.namespace, "labels": labels},
        "spec": {
            "replicas": w.hpa.min_replicas if w.hpa else w.replicas,
            "selector": {"matchLabels": {"app": w.name}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "vkprovider.io/gpu-type": s.fleet.gpu_type,
                        READY_DELAY_ANNOTATION: go_duration(s.real(s.fleet.ready_after)),
                        # a server that drains: it keeps answering through its grace period (on a
                        # real node, a preStop sleep), so a preempted local replica's terminating
                        # endpoint serves until the replacements are Ready
                        SERVE_THROUGH_GRACE_ANNOTATION: "true",
                    },
                },
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [local]},
                                    {"matchExpressions": [virtual]},
                                ]
                            },
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 100, "preference": {"matchExpressions": [local]}}
                            ],
                        }
                    },
                    "tolerations": [
                        {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "terminationGracePeriodSeconds": INFERENCE_GRACE_SECONDS,
                    # vLLM's own Kubernetes manifest: /dev/shm as a memory emptyDir (tensor-parallel
                    # workers share it) and an emptyDir model cache. Both are local storage, which
                    # the Descheduler refuses to evict unless the policy says otherwise: the day
                    # runs the manifest users run, so the return home is tested on it.
                    "volumes": [
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
                        {"name": "model-cache", "emptyDir": {}},
                    ],
                    "containers": [
                        {
                            "name": "server",
                            "image": "vllm/vllm-openai:v0.6.3",
                            "args": ["--model", w.name, "--port", str(CONTAINER_PORT)],
                            "ports": [{"containerPort": CONTAINER_PORT}],
                            "volumeMounts": [
                                {"name": "shm", "mountPath": "/dev/shm"},
                                {"name": "model-cache", "mountPath": "/root/.cache/huggingface"},
                            ],
                            "resources": {
                                "requests": {"cpu": "1", GPU: str(w.gpus)},
                                "limits": {GPU: str(w.gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }


def service(s: Scenario, w: Workload) -> JSON:
    """The workload's Service: what the day's load generator sends its requests to (through
    kube-proxy). No ``trafficDistribution``: every Ready replica, local or external, takes its
    share, so traffic moves out and home replica by replica. ``PreferSameZone`` would keep it
    all on the local replicas while any is Ready (billed external replicas idle, the local
    survivors take the whole load): docs/virtual-node.md, Local replicas first."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": w.name, "namespace": s.namespace, "labels": {WORKLOAD_LABEL: w.name}},
        "spec": {
            "selector": {"app": w.name},
            "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": CONTAINER_PORT}],
        },
    }


def pdb(s: Scenario, w: Workload) -> JSON | None:
    if w.pdb is None:
        return None
    spec: JSON = {"selector": {"matchLabels": {"app": w.name}}}
    if w.pdb.min_available is not None:
        spec["minAvailable"] = w.pdb.min_available
    else:
        spec["maxUnavailable"] = w.pdb.max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": w.name, "namespace": s.namespace},
        "spec": spec,
    }


def hpa(s: Scenario, w: Workload) -> JSON | None:
    if w.hpa is None:
        return None
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": w.name, "namespace": s.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": w.name},
            "minReplicas": w.hpa.min_replicas,
            "maxReplicas": w.hpa.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": w.hpa.target_cpu_percent},
                    },
                }
            ],
            # real seconds, as every control loop here: upstream's 5-minute scale-down window
            # would be the whole compressed day
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"stabilizationWindowSeconds": HPA_SCALE_DOWN_WINDOW_SECONDS},
            },
        },
    }


def training_pod_spec(s: Scenario, t: Training) -> JSON:
    per_pod = s.gpus_per_pod(t)
    return {
        "priorityClassName": priority_class_name(t.priority),
        "nodeSelector": {POOL_LABEL: POOL_VALUE},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "trainer",
                "image": "registry.example/trainer:1.0",
                "resources": {"requests": {GPU: str(per_pod)}, "limits": {GPU: str(per_pod)}},
            }
        ],
    }


def training_namespace(s: Scenario) -> str:
    """Where training Jobs are created: deploy/kueue's LocalQueue namespace through Kueue."""
    return KUEUE_NAMESPACE if s.training.kueue else s.namespace


def training_job(s: Scenario, t: Training, *, run_seconds: float) -> JSON:
    """A Job of ``gpus / gpus_per_pod`` pods that all run at once. kwok completes each pod
    ``run_seconds`` after it starts (on clusters with stage delays). Through Kueue it is created
    suspended in the LocalQueue's namespace and Kueue admits it whole (a gang) or not at all."""
    pods = t.gpus // s.gpus_per_pod(t)
    labels = {TRAINING_LABEL: t.name}
    job_labels = dict(labels)
    suspend: JSON = {}
    if s.training.kueue:
        job_labels |= {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: WORKLOAD_PRIORITY_CLASS}
        suspend = {"suspend": True}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": t.name, "namespace": training_namespace(s), "labels": job_labels},
        "spec": {
            **suspend,
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "backoffLimit": 100,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {COMPLETE_DELAY_ANNOTATION: go_duration(run_seconds)},
                },
                "spec": training_pod_spec(s, t),
            },
        },
    }


def training_pods(s: Scenario, t: Training) -> list[JSON]:
    """The same workers as bare pods, for clusters whose kwok completes Job pods at once."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{t.name}-{i}",
                "namespace": s.namespace,
                "labels": {TRAINING_LABEL: t.name},
            },
            "spec": training_pod_spec(s, t),
        }
        for i in range(t.gpus // s.gpus_per_pod(t))
    ]


def fakecloud_config(s: Scenario, p: ProviderSpec) -> JSON:
    """The fakecloud YAML for one provider; its times are the scenario's, converted to real seconds."""
    return {
        "provider": p.name,
        "seed": s.runtime.seed,
        "catalog": [
            {
                "id": f"{p.name}-{s.provider_gpu_type(p).lower()}-x{p.gpus}",
                "gpu_type": s.provider_gpu_type(p),
                "gpu_count": p.gpus,
                "region": p.region,
                "price_per_hour": p.price_per_hour,
                "capacity": p.capacity,
            }
        ],
        "lifecycle": {
            "provisioning_seconds": round(s.real(p.startup), 3),
            "serving_after_seconds": round(s.real(p.ready_after), 3),
            "log_interval_seconds": 5,
        },
        "knobs": {
            "error_rate": p.failure_rate,
            "loss_rate": p.loss_rate,
            "round_trip_seconds": p.round_trip_ms / 1000.0,
        },
    }
