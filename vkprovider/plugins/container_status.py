"""``DeploymentStatus`` of a cloud that runs one container per deployment.

Most GPU clouds run one container and report one state for the whole deployment; the status
the host wants still has a container list (``kubectl get pod`` shows it). Building both from the
one phase keeps them from disagreeing: ready is running, the container is running, terminated
or waiting as the deployment is, and it has a start time only while it runs.
"""

from __future__ import annotations

from datetime import datetime

from vkprovider.models import ContainerState, ContainerStatus, DeploymentStatus, Phase

__all__ = ["container_state", "one_container_status"]


def container_state(phase: Phase) -> ContainerState:
    """The container state that goes with a deployment phase."""
    if phase is Phase.RUNNING:
        return ContainerState.RUNNING
    if phase in (Phase.FAILED, Phase.SUCCEEDED):
        return ContainerState.TERMINATED
    return ContainerState.WAITING


def one_container_status(
    *,
    uid: str,
    node_name: str,
    provider_id: str,
    phase: Phase,
    reason: str = "",
    message: str = "",
    container: str = "main",
    container_message: str = "",
    image: str = "",
    ip: str | None = None,
    endpoint: str | None = None,
    started_at: datetime | None = None,
    price_per_hour: float | None = None,
) -> DeploymentStatus:
    """The status of a one-container deployment; the container's start time is ``started_at``
    while the deployment runs."""
    ready = phase is Phase.RUNNING
    return DeploymentStatus(
        uid=uid,
        phase=phase,
        ready=ready,
        node_name=node_name,
        provider_id=provider_id,
        ip=ip,
        endpoint=endpoint,
        reason=reason,
        message=message,
        started_at=started_at,
        price_per_hour=price_per_hour,
        containers=[
            ContainerStatus(
                name=container,
                state=container_state(phase),
                ready=ready,
                reason=reason,
                message=container_message,
                started_at=started_at if ready else None,
                image=image,
            )
        ],
    )
