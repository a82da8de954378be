"""Usage figures for ``/metrics/resource`` and ``/stats/summary``, from providers that have them.

A provider offers usage through the optional ``SupportsMetrics.usage(node)`` (one call for all
its deployments). Each scrape asks every such provider, with a timeout; one provider's failure
only leaves its pods out (``resource_scrape_error 1``), never the others. The text format uses
the kubelet's metric names and labels (what metrics-server v0.8 parses), with a timestamp on
every sample. The node's CPU counter is the sum of its pods' increments, kept monotonic here
so a finished pod does not read as a counter reset.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vkprovider.models import DeploymentUsage
from vkprovider.plugins.api import Provider, SupportsMetrics

log = logging.getLogger(__name__)


def metrics_source(provider: Provider) -> SupportsMetrics | None:
    """The provider's usage method, if it has one (the guard has ``usage`` exactly when its
    adapter has; a gRPC plugin always has it, and its capabilities say whether to use it)."""
    return provider if isinstance(provider, SupportsMetrics) else None


async def reported_usage(provider: Provider, node_name: str) -> list[DeploymentUsage] | None:
    """The provider's usage of ``node_name``, or None if it does not report usage: no ``usage``
    method, or ``capabilities.metrics`` not declared (the one rule for in-process adapters and
    gRPC plugins, whose ``usage`` would only answer UNIMPLEMENTED)."""
    source = metrics_source(provider)
    if source is None or not (await provider.info()).capabilities.metrics:
        return None
    return await source.usage(node_name)


@dataclass(frozen=True)
class PodUsage:
    pod: Mapping[str, Any]
    usage: DeploymentUsage


class UsageCollector:
    def __init__(self, node_name: str, *, timeout: float = 10.0) -> None:
        self.node_name = node_name
        self._timeout = timeout
        self._last: dict[str, float] = {}  #: uid → last cumulative CPU seconds
        self.node_cpu_seconds = 0.0
        self.started = datetime.now(UTC)

    async def collect(
        self, providers: Mapping[str, Provider], pods_by_uid: Mapping[str, Mapping[str, Any]]
    ) -> tuple[list[PodUsage], bool]:
        """(usage of this node's known pods, whether any provider failed)."""
        sources = {name: p for name, p in providers.items() if metrics_source(p) is not None}
        results = await asyncio.gather(
            *(asyncio.wait_for(reported_usage(p, self.node_name), self._timeout) for p in sources.values()),
            return_exceptions=True,
        )
        out: list[PodUsage] = []
        failed = False
        for name, result in zip(sources, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                failed = True
                log.warning("usage from provider %s failed: %s: %s", name, type(result).__name__, result)
                continue
            for item in result or ():
                if isinstance(item, DeploymentUsage) and item.uid in pods_by_uid:
                    out.append(PodUsage(pods_by_uid[item.uid], item))
        self._advance(out)
        return out, failed

    def _advance(self, usage: Iterable[PodUsage]) -> None:
        seen: dict[str, float] = {}
        for one in usage:
            total = sum(c.cpu_seconds_total for c in one.usage.containers)
            seen[one.usage.uid] = total
            self.node_cpu_seconds += max(0.0, total - self._last.get(one.usage.uid, 0.0))
        self._last = seen


def _labels(**labels: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


_HELP = {
    "container_cpu_usage_seconds_total": (
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
    ),
    "container_memory_working_set_bytes": ("gauge", "Current working set of the container in bytes"),
    "container_start_time_seconds": ("gauge", "Start time of the container since unix epoch in seconds"),
    "node_cpu_usage_seconds_total": ("counter", "Cumulative cpu time consumed by the node in core-seconds"),
    "node_memory_working_set_bytes": ("gauge", "Current working set of the node in bytes"),
    "pod_cpu_usage_seconds_total": ("counter", "Cumulative cpu time consumed by the pod in core-seconds"),
    "pod_memory_working_set_bytes": ("gauge", "Current working set of the pod in bytes"),
    "resource_scrape_error": (
        "gauge",
        "1 if there was an error while getting container metrics, 0 otherwise",
    ),
}


def _start_time(pod: Mapping[str, Any]) -> datetime | None:
    raw = pod.get("status", {}).get("startTime")
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else None
    except ValueError:
        return None


def resource_metrics(usage: list[PodUsage], collector: UsageCollector, failed: bool) -> str:
    """``/metrics/resource`` in the Prometheus text format, kubelet names and labels."""
    samples: dict[str, list[str]] = {name: [] for name in _HELP}
    now = datetime.now(UTC)
    node_memory = 0
    for one in usage:
        meta = one.pod.get("metadata", {})
        ns, pod = str(meta.get("namespace", "")), str(meta.get("name", ""))
        at = _ms(one.usage.timestamp)
        start = _start_time(one.pod)
        for c in one.usage.containers:
            labels = _labels(container=c.name, namespace=ns, pod=pod)
            samples["container_cpu_usage_seconds_total"].append(f"{labels} {c.cpu_seconds_total:.9g} {at}")
            samples["container_memory_working_set_bytes"].append(
                f"{labels} {c.memory_working_set_bytes} {at}"
            )
            if start is not None:
                samples["container_start_time_seconds"].append(f"{labels} {start.timestamp():.9g} {at}")
        pod_labels = _labels(namespace=ns, pod=pod)
        cpu = sum(c.cpu_seconds_total for c in one.usage.containers)
        memory = sum(c.memory_working_set_bytes for c in one.usage.containers)
        node_memory += memory
        samples["pod_cpu_usage_seconds_total"].append(f"{pod_labels} {cpu:.9g} {at}")
        samples["pod_memory_working_set_bytes"].append(f"{pod_labels} {memory} {at}")
    samples["node_cpu_usage_seconds_total"].append(f" {collector.node_cpu_seconds:.9g} {_ms(now)}")
    samples["node_memory_working_set_bytes"].append(f" {node_memory} {_ms(now)}")
    samples["resource_scrape_error"].append(f" {int(failed)}")
    lines = []
    for name, (kind, text) in _HELP.items():
        if not samples[name]:
            continue
        lines += [f"# HELP {name} [STABLE] {text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{sample}" for sample in samples[name]]
    return "\n".join(lines) + "\n"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def stats_summary(usage: list[PodUsage], collector: UsageCollector) -> dict[str, Any]:
    """``/stats/summary`` (the kubelet's ``statsapi.Summary``), the fields we have figures for."""
    now = _iso(datetime.now(UTC))
    pods = []
    node_memory, node_cores = 0, 0.0
    for one in usage:
        meta = one.pod.get("metadata", {})
        at = _iso(one.usage.timestamp)
        start = one.pod.get("status", {}).get("startTime") or now
        containers = []
        for c in one.usage.containers:
            cpu: dict[str, Any] = {"time": at, "usageCoreNanoSeconds": int(c.cpu_seconds_total * 1e9)}
            if c.cpu_cores is not None:
                cpu["usageNanoCores"] = int(c.cpu_cores * 1e9)
            containers.append(
                {
                    "name": c.name,
                    "startTime": start,
                    "cpu": cpu,
                    "memory": {"time": at, "workingSetBytes": c.memory_working_set_bytes},
                }
            )
        memory = sum(c.memory_working_set_bytes for c in one.usage.containers)
        cores = sum(c.cpu_cores or 0.0 for c in one.usage.containers)
        node_memory, node_cores = node_memory + memory, node_cores + cores
        pod_cpu = {
            "time": at,
            "usageNanoCores": int(cores * 1e9),
            "usageCoreNanoSeconds": int(sum(c.cpu_seconds_total for c in one.usage.containers) * 1e9),
        }
        pods.append(
            {
                "podRef": {
                    "name": meta.get("name", ""),
                    "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid", ""),
                },
                "startTime": start,
                "containers": containers,
                "cpu": pod_cpu,
                "memory": {"time": at, "workingSetBytes": memory},
            }
        )
    node = {
        "nodeName": collector.node_name,
        "startTime": _iso(collector.started),
        "cpu": {
            "time": now,
            "usageNanoCores": int(node_cores * 1e9),
            "usageCoreNanoSeconds": int(collector.node_cpu_seconds * 1e9),
        },
        "memory": {"time": now, "workingSetBytes": node_memory},
    }
    return {"node": node, "pods": pods}
