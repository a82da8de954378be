"""Pod status built from provider status: complete, truthful, and stable enough to skip duplicates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from vkprovider.models import ContainerState, ContainerStatus, DeploymentStatus, Phase
from vkprovider.pods.status import build_status, needs_write


def pod(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "n", "uid": "u1"},
        "spec": {
            "containers": [{"name": "server", "image": "img:1"}, {"name": "sidecar", "image": "side:2"}]
        },
        "status": status or {"phase": "Pending"},
    }


def test_running_but_not_serving_is_not_ready() -> None:
    deployment = DeploymentStatus(
        uid="u1", phase=Phase.RUNNING, ready=False, ip="10.1.2.3", provider_id="d-7"
    )
    status = build_status(pod(), deployment, provider="cheap", host_ip="127.0.0.1")
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert status["phase"] == "Running"
    assert conditions == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }
    assert status["podIP"] == "10.1.2.3" and status["hostIP"] == "127.0.0.1" and status["startTime"]
    assert [c["name"] for c in status["containerStatuses"]] == ["server", "sidecar"]
    assert status["containerStatuses"][0]["containerID"] == "vkprovider://cheap/d-7/server"


def test_ready_only_when_the_provider_says_it_serves() -> None:
    started = datetime(2026, 1, 1, tzinfo=UTC)
    deployment = DeploymentStatus(uid="u1", phase=Phase.RUNNING, ready=True, started_at=started)
    status = build_status(pod(), deployment, provider="cheap", host_ip="127.0.0.1")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    assert all(c["ready"] and "running" in c["state"] for c in status["containerStatuses"])


def test_terminated_container_carries_exit_code_and_reason() -> None:
    deployment = DeploymentStatus(
        uid="u1",
        phase=Phase.FAILED,
        containers=[
            ContainerStatus(
                name="server", state=ContainerState.TERMINATED, exit_code=137, reason="OOMKilled"
            ),
        ],
    )
    status = build_status(
        pod(), deployment, provider="c", host_ip="h", phase="Failed", reason="ProviderFailed"
    )
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137 and terminated["reason"] == "OOMKilled"
    assert status["reason"] == "ProviderFailed"


def test_unknown_phase_keeps_what_the_pod_showed() -> None:
    deployment = DeploymentStatus(uid="u1", phase=Phase.UNKNOWN)
    status = build_status(pod({"phase": "Running"}), deployment, provider="c", host_ip="h")
    assert status["phase"] == "Running"


def test_writing_the_same_status_twice_is_detected_as_a_duplicate() -> None:
    deployment = DeploymentStatus(uid="u1", phase=Phase.RUNNING, ready=True, ip="10.0.0.9")
    first = build_status(pod(), deployment, provider="c", host_ip="h")
    written = pod(first)
    second = build_status(written, deployment, provider="c", host_ip="h")
    assert not needs_write(written, second)
    assert second["conditions"] == first["conditions"]  # transition times kept
    changed = DeploymentStatus(uid="u1", phase=Phase.RUNNING, ready=False, ip="10.0.0.9")
    assert needs_write(written, build_status(written, changed, provider="c", host_ip="h"))


def test_conditions_of_other_writers_are_carried_over() -> None:
    other = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
        {"type": "example.com/gate", "status": "True"},
    ]
    deployment = DeploymentStatus(uid="u1", phase=Phase.RUNNING, ready=True)
    status = build_status(
        pod({"phase": "Running", "conditions": other}), deployment, provider="c", host_ip="h"
    )
    types = [c["type"] for c in status["conditions"]]
    assert types[:4] == ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
    assert types[4:] == ["DisruptionTarget", "example.com/gate"]


def test_a_finished_pod_never_shows_waiting_or_running_containers() -> None:
    deployment = DeploymentStatus(uid="u1", phase=Phase.RUNNING, ready=True)
    status = build_status(
        pod(), deployment, provider="c", host_ip="h", phase="Failed", reason="ProviderLost", message="gone"
    )
    states = [c["state"] for c in status["containerStatuses"]]
    assert all(s["terminated"]["reason"] == "ProviderLost" for s in states)
    assert all(s["terminated"]["exitCode"] == 137 for s in states)
    assert not any(c["ready"] or c["started"] for c in status["containerStatuses"])


def test_pending_reason_is_what_the_containers_wait_for() -> None:
    status = build_status(
        pod(), None, provider="none", host_ip="h", phase="Pending", waiting=("BudgetExceeded", "ns over 2/h")
    )
    waiting = status["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "BudgetExceeded", "message": "ns over 2/h"}


def test_a_running_pod_whose_deployment_provisions_again_stays_running_and_waits() -> None:
    """restartPolicy redeploys: the new deployment is Pending, the pod is not (kubelet semantics)."""
    deployment = DeploymentStatus(uid="u1", phase=Phase.PENDING)
    status = build_status(pod({"phase": "Running"}), deployment, provider="c", host_ip="h", restarts=1)
    assert status["phase"] == "Running"
    assert all("waiting" in c["state"] for c in status["containerStatuses"])
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
    fresh = build_status(pod({"phase": "Pending"}), deployment, provider="c", host_ip="h")
    assert fresh["phase"] == "Pending"  # a pod that never ran still shows Pending
