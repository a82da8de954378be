"""Pure mapping of the remote-Kubernetes adapter (the cluster-backed tests cover the wiring)."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from vkprovider_kubernetes.client import Op, map_error
from vkprovider_kubernetes.manifest import Manifests, label_value, parse_offer_id, pod_name, service_for
from vkprovider_kubernetes.settings import KubernetesSettings
from vkprovider_kubernetes.status import offers_from_nodes, status_from_pod

from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    LABEL_POD_UID,
    Container,
    ContainerState,
    DeploymentRequest,
    EnvVar,
    InvalidRequest,
    NotFound,
    Phase,
    Port,
    QuotaOrBilling,
    RegistryCredential,
    Transient,
)

SETTINGS = KubernetesSettings(kubeconfig=Path("/nonexistent"), namespace="remote", price_per_gpu_hour=2.0)


def request_for(**changes: Any) -> DeploymentRequest:
    base: dict[str, Any] = {
        "uid": "0b9f3c1e-1111-2222-3333-444455556666",
        "namespace": "serving",
        "name": "llm-0",
        "node_name": "vk-external",
        "containers": [Container(name="c", image="img", env=[EnvVar(name="T", value="tok", secret=True)])],
        "gpu_count": 2,
    }
    base.update(changes)
    return DeploymentRequest(**base)


def test_names_and_label_values_are_valid_and_deterministic() -> None:
    assert pod_name("0b9f3c1e-1111") == "vk-0b9f3c1e-1111"
    odd = pod_name("Weird_UID/with:chars")
    assert odd == pod_name("Weird_UID/with:chars") and odd.startswith("vk-") and len(odd) <= 63
    assert label_value("vk-external") == "vk-external"
    long = label_value("n" * 100)
    assert long.startswith("h-") and len(long) <= 63 and long == label_value("n" * 100)
    assert parse_offer_id("H100-SXM-80GB/4") == ("H100-SXM-80GB", 4)
    assert parse_offer_id("/1") == ("", 1)
    assert parse_offer_id("nonsense") is None


def test_manifest_keeps_secrets_out_of_the_pod_spec() -> None:
    creds = [RegistryCredential(server="ghcr.io", username="bot", password="pw")]
    m = Manifests(request_for(registry_credentials=creds, node_name="x" * 80), SETTINGS, ["H100-SXM-80GB"])
    text = json.dumps(m.pod)
    assert "tok" not in text and "pw" not in text
    env = m.pod["spec"]["containers"][0]["env"][0]
    assert env["valueFrom"]["secretKeyRef"]["name"] == m.name
    assert m.secret is not None and base64.b64decode(next(iter(m.secret["data"].values()))) == b"tok"
    assert m.pull_secret is not None and m.pod["spec"]["imagePullSecrets"] == [{"name": f"{m.name}-pull"}]
    auths = json.loads(base64.b64decode(m.pull_secret["data"][".dockerconfigjson"]))["auths"]
    assert auths["ghcr.io"]["username"] == "bot"
    meta = m.pod["metadata"]
    assert meta["labels"][LABEL_NODE_NAME].startswith("h-")  # 80 chars is not a label value
    assert meta["annotations"][LABEL_NODE_NAME] == "x" * 80
    assert meta["labels"][LABEL_POD_UID] == "0b9f3c1e-1111-2222-3333-444455556666"
    assert m.pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "H100-SXM-80GB"}
    assert m.pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_several_gpu_label_values_become_node_affinity() -> None:
    m = Manifests(request_for(), SETTINGS, ["b", "a"])
    terms = m.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a", "b"]


def pod(phase: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "vk-u",
            "namespace": "remote",
            "annotations": {LABEL_POD_UID: "u", LABEL_NODE_NAME: "n"},
        },
        "status": {"phase": phase, **status},
    }


def test_status_maps_phase_ready_and_containers() -> None:
    running = pod(
        "Running",
        podIP="10.0.0.7",
        startTime="2026-01-01T00:00:00Z",
        conditions=[{"type": "Ready", "status": "True"}],
        containerStatuses=[
            {
                "name": "c",
                "ready": True,
                "restartCount": 2,
                "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}},
            }
        ],
    )
    s = status_from_pod("p", running)
    assert (s.phase, s.ready, s.ip, s.uid, s.node_name, s.provider_id) == (
        Phase.RUNNING,
        True,
        "10.0.0.7",
        "u",
        "n",
        "remote/vk-u",
    )
    assert s.containers[0].state is ContainerState.RUNNING and s.containers[0].restart_count == 2

    failed = pod(
        "Failed",
        reason="Evicted",
        containerStatuses=[{"name": "c", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}],
    )
    f = status_from_pod("p", failed)
    assert (f.phase, f.reason, f.containers[0].exit_code) == (Phase.FAILED, "Evicted", 137)

    waiting = pod(
        "Pending", containerStatuses=[{"name": "c", "state": {"waiting": {"reason": "ErrImagePull"}}}]
    )
    assert status_from_pod("p", waiting).reason == "ErrImagePull"
    unscheduled = pod(
        "Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    )
    assert status_from_pod("p", unscheduled).reason == "Unschedulable"


def test_unknown_phase_is_unknown_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        status = status_from_pod("remote-k8s", pod("Hibernating"))
    assert status.phase is Phase.UNKNOWN
    assert "remote-k8s" in caplog.text and "Hibernating" in caplog.text


def node(name: str, gpus: int, label: str = "NVIDIA-H100-80GB-HBM3", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": label}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_offers_count_free_gpus_per_shape() -> None:
    nodes = [node("a", 8), node("b", 4), node("down", 8, ready=False), node("l4", 2, label="NVIDIA-L4")]
    pods = [
        {"spec": {"nodeName": "a", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}]}},
        {
            "spec": {"nodeName": "a", "containers": [{"resources": {"requests": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Succeeded"},
        },
    ]
    offers = {(o.gpu_type, o.gpu_count): o for o in offers_from_nodes("p", nodes, pods, SETTINGS)}
    assert set(offers) == {
        ("H100-SXM-80GB", 1),
        ("H100-SXM-80GB", 2),
        ("H100-SXM-80GB", 4),
        ("H100-SXM-80GB", 8),
        ("L4-24GB", 1),
        ("L4-24GB", 2),
    }
    assert offers["H100-SXM-80GB", 1].capacity == 5 + 4
    assert offers["H100-SXM-80GB", 4].capacity == 1 + 1
    assert offers["H100-SXM-80GB", 8].capacity == 0
    assert offers["H100-SXM-80GB", 2].price_per_hour == 4.0
    assert offers["H100-SXM-80GB", 2].offer_id == "NVIDIA-H100-80GB-HBM3/2"
    assert offers["H100-SXM-80GB", 1].gpu_memory_gb == 80


@pytest.mark.parametrize(
    ("op", "status", "expected"),
    [
        (Op.CREATE, 422, InvalidRequest),
        (Op.CREATE, 403, QuotaOrBilling),
        (Op.CREATE, 404, QuotaOrBilling),
        (Op.READ, 404, NotFound),
        (Op.READ, 401, QuotaOrBilling),
        (Op.READ, 429, Transient),
        (Op.DELETE, 409, Transient),
        (Op.READ, 410, Transient),
        (Op.READ, 503, Transient),
        (Op.NODES, 400, InvalidRequest),
        (Op.READ, 402, QuotaOrBilling),  # the shared table's reading, like every HTTP adapter
    ],
)
def test_error_mapping(op: Op, status: int, expected: type) -> None:
    body = json.dumps({"kind": "Status", "reason": "Whatever", "message": "details here"}).encode()
    error = map_error("remote-k8s", op, status=status, body=body, retry_after="3")
    assert type(error) is expected and "details here" in str(error)
    if expected is Transient:
        assert isinstance(error, Transient) and error.retry_after == 3


def test_network_errors_are_transient() -> None:
    assert isinstance(map_error("p", Op.READ, exc=TimeoutError()), Transient)


def test_the_service_exposes_each_declared_port_and_selects_only_its_pod() -> None:
    ports = [Port(container_port=8000, name="http"), Port(container_port=5353, protocol="UDP")]
    container = Container(name="c", image="img", ports=ports)
    pod = Manifests(request_for(containers=[container]), SETTINGS, []).pod
    pod = {**pod, "metadata": {**pod["metadata"], "namespace": "remote", "uid": "remote-pod-uid"}}
    service = service_for(pod, "NodePort")
    assert service is not None
    assert service["metadata"]["name"] == pod["metadata"]["name"]
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["selector"] == {LABEL_POD_UID: "0b9f3c1e-1111-2222-3333-444455556666"}
    assert [(p["port"], p["targetPort"], p["protocol"]) for p in service["spec"]["ports"]] == [
        (8000, 8000, "TCP"),
        (5353, 5353, "UDP"),
    ]
    assert service["metadata"]["ownerReferences"][0]["uid"] == "remote-pod-uid"  # goes with the pod
    bare = Manifests(request_for(), SETTINGS, []).pod
    assert service_for({**bare, "metadata": {**bare["metadata"], "uid": "u"}}, "NodePort") is None
