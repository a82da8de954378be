"""Deployment lifecycle as a function of time: provisioning → running → serving → exited/failed.

``status_of`` and ``log_lines`` read a deployment and the clock and return what a real cloud would
report at that instant; nothing here mutates state.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from vkprovider.plugins.api import (
    ContainerState,
    ContainerStatus,
    DeploymentEndpoints,
    DeploymentStatus,
    Phase,
    PortMapping,
)

from .config import FakeCloudConfig
from .deployment import Deployment, Outcome

_MAX_HEARTBEATS = 10_000


def _natural_end(d: Deployment, config: FakeCloudConfig) -> Outcome | None:
    if d.run_seconds is None:
        return None
    at = d.created + config.lifecycle.provisioning_seconds + d.run_seconds
    if d.exit_code == 0:
        return Outcome(Phase.SUCCEEDED, "Completed", "", 0, at)
    return Outcome(Phase.FAILED, "Error", f"container exited with code {d.exit_code}", d.exit_code, at)


def ending(d: Deployment, config: FakeCloudConfig, now: float) -> Outcome | None:
    """The outcome in effect at ``now`` (an admin verb wins over a later natural end)."""
    natural = _natural_end(d, config)
    candidates = [o for o in (d.outcome, natural) if o is not None and o.at <= now]
    return min(candidates, key=lambda o: o.at) if candidates else None


def _wall(d: Deployment, at: float) -> datetime:
    return d.created_wall + timedelta(seconds=at - d.created)


def endpoints_of(
    d: Deployment, config: FakeCloudConfig, now: float, *, routable: bool
) -> DeploymentEndpoints:
    """How a client reaches ``d``: its address, every container port on the same port number.

    Only a deployment that has started and not ended has an address; ``routable=False`` (the
    knob) stands for a cloud that offers no route to its deployments.
    """
    started = d.created + config.lifecycle.provisioning_seconds
    running = started <= now and ending(d, config, now) is None
    if not (routable and running):
        return DeploymentEndpoints(uid=d.uid)
    ports = {
        (p.container_port, p.protocol): PortMapping(
            container_port=p.container_port, protocol=p.protocol, port=p.container_port
        )
        for c in d.request.containers
        for p in c.ports
    }
    return DeploymentEndpoints(uid=d.uid, addresses=[d.ip], ports=list(ports.values()))


def status_of(d: Deployment, config: FakeCloudConfig, now: float) -> DeploymentStatus:
    life = config.lifecycle
    started = d.created + life.provisioning_seconds
    serving = started + life.serving_after_seconds
    end = ending(d, config, now)
    ran = started <= (end.at if end else now)
    ports = [p.container_port for c in d.request.containers for p in c.ports]
    common = {
        "uid": d.uid,
        "node_name": d.request.node_name,
        "provider_id": d.provider_id,
        "offer_id": d.offer.id,
        "price_per_hour": d.offer.price_per_hour,
        "ip": d.ip if ran else None,
        "endpoint": f"http://{d.ip}:{ports[0]}" if ran and ports else None,
        "started_at": _wall(d, started) if ran else None,
    }
    if end is not None:
        containers = [
            ContainerStatus(
                name=c.name,
                state=ContainerState.TERMINATED,
                reason=end.reason,
                message=end.message,
                exit_code=end.exit_code,
                started_at=_wall(d, started) if ran else None,
                finished_at=_wall(d, end.at),
                image=c.image,
            )
            for c in d.request.containers
        ]
        return DeploymentStatus(
            phase=end.phase, reason=end.reason, message=end.message, containers=containers, **common
        )
    if now < started:
        waiting = [
            ContainerStatus(name=c.name, reason="ContainerCreating", image=c.image)
            for c in d.request.containers
        ]
        return DeploymentStatus(
            phase=Phase.PENDING,
            reason="Provisioning",
            message="waiting for a GPU",
            containers=waiting,
            **common,
        )
    ready = now >= serving
    running = [
        ContainerStatus(
            name=c.name,
            state=ContainerState.RUNNING,
            ready=ready,
            started_at=_wall(d, started),
            image=c.image,
        )
        for c in d.request.containers
    ]
    return DeploymentStatus(phase=Phase.RUNNING, ready=ready, containers=running, **common)


def log_lines(d: Deployment, config: FakeCloudConfig, now: float) -> list[tuple[float, str, str]]:
    """Every log line emitted up to ``now`` as (time, container, text); container "" = all."""
    life = config.lifecycle
    started = d.created + life.provisioning_seconds
    serving = started + life.serving_after_seconds
    end = ending(d, config, now)
    stop = min(now, end.at) if end else now
    offer = d.offer
    lines: list[tuple[float, str, str]] = [
        (
            d.created,
            "",
            f"fakecloud[{config.provider}]: {d.provider_id} scheduled on offer {offer.id} "
            f"({offer.gpu_count} x {offer.gpu_type}, {offer.region}, ${offer.price_per_hour:.2f}/h)",
        )
    ]
    for c in d.request.containers:
        lines.append((d.created, c.name, f"pulling image {c.image}"))
        if started <= stop:
            lines.append((started, c.name, f"container {c.name} started"))
            if c.env:  # names only: values may be secrets
                lines.append((started, c.name, "env: " + " ".join(sorted({e.name for e in c.env}))))
            lines.extend((started, c.name, text) for text in life.log_lines)
        if serving <= stop:
            port = next((p.container_port for p in c.ports), None)
            lines.append((serving, c.name, f"ready: serving on port {port}" if port else "ready"))
        if started <= stop:
            count = int((stop - started) / life.log_interval_seconds)
            for k in range(max(1, count - _MAX_HEARTBEATS + 1), count + 1):
                lines.append((started + k * life.log_interval_seconds, c.name, f"{c.name}: heartbeat {k}"))
        if end is not None:
            text = f"container {c.name} exited with code {end.exit_code}"
            lines.append((end.at, c.name, text + (f" ({end.reason}: {end.message})" if end.message else "")))
    lines.extend(line for line in d.extra_logs if line[0] <= now)
    lines.sort(key=lambda line: line[0])
    return lines
