"""Run the real Kubernetes Descheduler (built by ``make cluster-build``) against a dev cluster.

It runs as a plain process beside the control plane, in a loop (``--descheduling-interval``),
with the admin kubeconfig and a policy file (see ``deploy/descheduler/``). Evictions go through
the eviction API, so PodDisruptionBudgets hold. The process joins the cluster's process list,
so ``Cluster.stop()`` stops it by PID with the rest.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.cluster import Cluster
from vkprovider.devcluster.process import Process, StartupError, spawn

#: The repository's policy: bring the pods the gate marked home off its taint, a few at a time.
POLICY_FILE = Path(__file__).resolve().parents[2] / "deploy" / "descheduler" / "policy.yaml"


def shipped_policy(*, min_pod_age: str | None = None) -> dict[str, Any]:
    """``deploy/descheduler/policy.yaml`` as shipped, with only ``minPodAge`` replaced when
    given (the simulated day runs on a compressed clock)."""
    policy: dict[str, Any] = yaml.safe_load(POLICY_FILE.read_text())
    if min_pod_age is not None:
        for profile in policy.get("profiles", []):
            for plugin in profile.get("pluginConfig", []):
                if plugin.get("name") == "DefaultEvictor":
                    plugin.setdefault("args", {})["minPodAge"] = min_pod_age
    return policy


def return_home_policy(
    *,
    taint_key: str = "local-capacity",
    mark_label: str = "vkprovider.io/return-home",
    min_pod_age: str = "2m",
    per_node: int = 2,
    per_namespace: int = 2,
    total: int = 4,
    namespaces: list[str] | None = None,
) -> dict[str, Any]:
    """The descheduler/v1alpha2 policy of ``deploy/descheduler/policy.yaml``, parameterised for
    tests (e.g. limited to a test's namespace, a shorter ``minPodAge``)."""
    args: dict[str, Any] = {"includedTaints": [taint_key]}
    if namespaces:
        args["namespaces"] = {"include": namespaces}
    evictor = {
        "labelSelector": {"matchLabels": {mark_label: "true"}},
        "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]},
        "minPodAge": min_pod_age,
        "nodeFit": True,
    }
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": per_node,
        "maxNoOfPodsToEvictPerNamespace": per_namespace,
        "maxNoOfPodsToEvictTotal": total,
        "profiles": [
            {
                "name": "return-home",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": evictor},
                    {"name": "RemovePodsViolatingNodeTaints", "args": args},
                ],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
            }
        ],
    }


async def start_descheduler(
    cluster: Cluster,
    policy: Path | dict[str, Any] = POLICY_FILE,
    *,
    interval_seconds: float = 2.0,
    verbosity: int = 3,
    toolchain: Toolchain | None = None,
) -> Process:
    """Start the descheduler looping every ``interval_seconds``; returns its Process."""
    toolchain = toolchain or Toolchain.default()
    if toolchain.missing(("descheduler",)):
        raise StartupError("the descheduler binary is missing; run `make cluster-build` first")
    if isinstance(policy, dict):
        path = cluster.workdir / "descheduler-policy.yaml"
        path.write_text(yaml.safe_dump(policy, sort_keys=False))
        policy = path
    proc = spawn(
        "descheduler",
        toolchain.binary("descheduler"),
        [
            f"--kubeconfig={cluster.kubeconfig}",
            f"--policy-config-file={policy}",
            f"--descheduling-interval={interval_seconds}s",
            "--secure-port=0",  # no metrics server: nothing else listens
            f"--v={verbosity}",
        ],
        cluster.workdir / "logs",
    )
    cluster.processes.append(proc)
    cluster.save()
    await asyncio.sleep(0.5)
    if not proc.alive():
        raise StartupError(proc.exit_reason())
    return proc


async def stop_descheduler(cluster: Cluster, proc: Process) -> None:
    await asyncio.to_thread(proc.stop)
    if proc in cluster.processes:
        cluster.processes.remove(proc)
        cluster.save()
