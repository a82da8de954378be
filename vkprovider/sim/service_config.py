"""The ``vkprovider serve`` config a scenario runs with, and its check before anything starts.

Short timings throughout (status, probes, orphan GC, the gate's dwell) because the control
loops run in wall time while the day is compressed. ``preflight`` validates the generated config
(including the scenario's ``runtime.gate`` overrides) with the service's own schema, so a bad
override is refused naming ``runtime.gate.<field>`` instead of failing half-way through start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vkprovider.config import Settings
from vkprovider.devcluster import kwok
from vkprovider.sim.kueue import CLUSTER_QUEUE, FLAVOR, GPU
from vkprovider.sim.scenario import Scenario, ScenarioError

VIRTUAL_NODE = "vk-external"
GATE_TAINT_KEY = "local-capacity"


@dataclass(frozen=True)
class KubeletEndpoint:
    """Where the virtual node serves the kubelet API: the dev cluster's network-namespace address
    (the apiserver refuses to proxy to loopback), a serving cert from the cluster CA with that IP,
    and the cluster CA to verify the apiserver's (and metrics-server's) client certificates."""

    ip: str
    port: int
    cert_file: Path
    key_file: Path
    client_ca_file: Path

    def section(self) -> dict[str, Any]:
        return {
            "tls_cert_file": str(self.cert_file),
            "tls_key_file": str(self.key_file),
            "client_ca_file": str(self.client_ca_file),
        }


def gate_supported() -> bool:
    return "gate" in Settings.model_fields


def gate_section(s: Scenario) -> dict[str, Any]:
    """The ``gate:`` section: the kube signal on the local pool, a band that fits the workloads'
    replica size, real-second timings; the scenario may override any key."""
    smallest = min(w.gpus for w in s.workloads)
    base: dict[str, Any] = {
        "signal": {"kind": "kube", "kube": {"node_selector": kwok.GPU_POOL_SELECTOR}},
        "taint": {"key": GATE_TAINT_KEY, "value": "available", "effect": "NoSchedule"},
        "taint_at_free_gpus": max(2, smallest),
        "untaint_below_free_gpus": smallest,
        "dwell_seconds": 3,
        "min_flip_interval_seconds": 5,
        "interval_seconds": 1,
        "signal_timeout_seconds": 30,
    }
    return {**base, **s.runtime.gate}


def serve_config(
    s: Scenario,
    clouds: dict[str, str],
    kubeconfig: Path,
    admin_port: int,
    node: str = VIRTUAL_NODE,
    kubelet: KubeletEndpoint | None = None,
) -> dict[str, Any]:
    """``kubelet``: serve the kubelet API there and advertise its address (``kubectl logs``, the
    node proxy, metrics-server); None: no kubelet API, the node advertises 127.0.0.1."""
    config: dict[str, Any] = {
        "node": {
            "name": node,
            "internal_ip": kubelet.ip if kubelet else "127.0.0.1",
            "status_update_seconds": 5,
            "probe_seconds": 2,
            "lease_renew_seconds": 5,
        },
        "kube": {"kubeconfig": str(kubeconfig), "qps": 50, "burst": 100},
        "pods": {
            "workers": 16,
            "status_poll_seconds": 1,
            "orphan_gc_seconds": 10,
            "lost_grace_seconds": 10,
            "backoff_base_seconds": 0.5,
            "backoff_max_seconds": 5,
        },
        "http": {"admin_host": "127.0.0.1", "admin_port": admin_port},
        "providers": [
            {"name": name, "adapter": "fakecloud", "settings": {"url": url}} for name, url in clouds.items()
        ],
        "placement": {"offer_refresh_seconds": 2, "blocklist_ttl_seconds": 10},
    }
    if kubelet is not None:
        config["node"]["kubelet_port"] = kubelet.port
        config["kubelet"] = kubelet.section()
    if gate_supported():
        config["gate"] = gate_section(s)
    if s.training.kueue:  # the quota sync, on the leader, as a deployment would run it
        config["leader_election"] = {"enabled": True, "namespace": "default", "identity": f"{node}-sim"}
        config["quota"] = quota_section(s)
    return config


def quota_section(s: Scenario) -> dict[str, Any]:
    reserve = {GPU: str(s.training.reserve_gpus)} if s.training.reserve_gpus else {}
    return {
        "cluster_queue": CLUSTER_QUEUE,
        "flavor": FLAVOR,
        "node_selector": {kwok.GPU_POOL_LABEL: kwok.GPU_POOL_VALUE},
        "interval_seconds": s.training.quota_sync_seconds,
        "reserve": reserve,
    }


def preflight(s: Scenario, source: str = "scenario") -> None:
    """Refuse a scenario whose generated service config the service would refuse."""
    if s.runtime.gate and not gate_supported():
        raise ScenarioError(f"invalid scenario {source}:\n  runtime.gate: this build has no gate")
    clouds = {p.name: f"http://127.0.0.1:{18000 + i}" for i, p in enumerate(s.providers)}
    try:
        Settings(**serve_config(s, clouds, Path("kubeconfig"), 10255))
    except ValidationError as exc:
        lines = [f"invalid scenario {source}:"]
        for err in exc.errors():
            field = ".".join(str(part) for part in err["loc"])
            if field == "gate" or field.startswith("gate."):
                field = f"runtime.{field}"
            lines.append(f"  {field}: {str(err['msg']).removeprefix('Value error, ')}")
        raise ScenarioError("\n".join(lines)) from None
