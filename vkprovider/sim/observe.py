"""One sample of the world: what the apiserver shows (pods, nodes, Deployments) and what the
providers bill, reduced to the numbers the report and the live view need.

``sample_from`` is pure (lists in, :class:`Sample` out) so the counting rules are unit-tested;
``Observer.sample`` does the three list calls and the ledger reads.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeNotFound
from vkprovider.sim import kueue
from vkprovider.sim.ledger import LedgerReader
from vkprovider.sim.manifests import GPU, POOL_LABEL, POOL_VALUE, TRAINING_LABEL, WORKLOAD_LABEL
from vkprovider.sim.record import (
    Admission,
    LedgerEntry,
    NodeSample,
    Sample,
    TrainingSample,
    WorkloadSample,
)
from vkprovider.sim.scenario import Scenario

JSON = dict[str, Any]
PROVIDER_ANNOTATION = "vkprovider.io/provider"


def _ready(obj: JSON) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _gpus(pod: JSON) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        limits = (container.get("resources") or {}).get("limits") or {}
        total += int(requests.get(GPU) or limits.get(GPU) or 0)
    return total


def live(pod: JSON) -> bool:
    """A pod that counts as a replica: not finished and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def is_local_node(node: JSON) -> bool:
    return (node["metadata"].get("labels") or {}).get(POOL_LABEL) == POOL_VALUE


def schedulable(node: JSON) -> bool:
    taints = node["spec"].get("taints") or []
    hard = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)
    return _ready(node) and not node["spec"].get("unschedulable") and not hard


def sample_from(
    s: Scenario,
    *,
    t: float,
    pods: list[JSON],
    nodes: list[JSON],
    deployments: list[JSON],
    virtual_node: str,
    gate_taint_key: str,
    ledger: list[LedgerEntry] | None = None,
    jobs: list[JSON] | None = None,
    kueue_workloads: list[JSON] | None = None,
    cluster_queue: JSON | None = None,
) -> Sample:
    """``jobs``, ``kueue_workloads`` and ``cluster_queue`` (training via Kueue) add each
    training's queue state and the queue's GPU quota."""
    local_nodes = {n["metadata"]["name"]: n for n in nodes if is_local_node(n)}
    virtual = next((n for n in nodes if n["metadata"]["name"] == virtual_node), None)
    sample = Sample(t=t)
    sample.workloads = {w.name: WorkloadSample() for w in s.workloads}
    sample.virtual_pod_uids = []
    sample.training = {tr.name: TrainingSample() for _, tr in s.trainings()}
    for d in deployments:
        name = d["metadata"]["name"]
        if name in sample.workloads:
            sample.workloads[name].desired = int(d["spec"].get("replicas") or 0)
    for name, n in sorted(local_nodes.items()):
        sample.nodes[name] = NodeSample(
            gpus=int(((n.get("status") or {}).get("allocatable") or {}).get(GPU) or 0),
            ready=_ready(n),
            cordoned=not schedulable(n),
        )
    for pod in pods:
        node = pod["spec"].get("nodeName") or ""
        if node == virtual_node and (uid := pod["metadata"].get("uid")):
            sample.virtual_pod_uids.append(uid)  # terminating and finished ones too: they still exist
        if not live(pod):
            continue
        labels = pod["metadata"].get("labels") or {}
        if node in local_nodes:
            sample.local_gpus_used += _gpus(pod)
        if (name := labels.get(WORKLOAD_LABEL)) in sample.workloads:
            w = sample.workloads[name]
            if node == virtual_node:
                w.external += 1
                w.ready_external += _ready(pod)
                if _ready(pod):
                    w.ready_external_uids.append(pod["metadata"].get("uid", ""))
                provider = (pod["metadata"].get("annotations") or {}).get(PROVIDER_ANNOTATION, "?")
                sample.external_by_provider[provider] = sample.external_by_provider.get(provider, 0) + 1
            elif node:
                w.local += 1
                w.ready_local += _ready(pod)
            else:
                w.pending += 1
        elif (name := labels.get(TRAINING_LABEL)) in sample.training:
            tr = sample.training[name]
            if node:
                tr.running += 1
                tr.gpus += _gpus(pod)
                if node in sample.nodes:
                    sample.nodes[node].training_gpus += _gpus(pod)
            else:
                tr.pending += 1
    for name, node in sorted(local_nodes.items()):
        if node["spec"].get("unschedulable"):
            sample.cordoned.append(name)
        if schedulable(node):
            sample.local_gpus += int(((node.get("status") or {}).get("allocatable") or {}).get(GPU) or 0)
    if virtual is not None:
        taints = virtual["spec"].get("taints") or []
        sample.gate_tainted = any(t.get("key") == gate_taint_key for t in taints)
    sample.spend_rate = sum(e.price_per_hour for e in ledger or [] if e.open_at(t))
    if kueue_workloads is not None:
        by_job = {name: w for w in kueue_workloads if (name := kueue.owner_job(w))}
        existing = {j["metadata"]["name"] for j in jobs or []}
        for name, tr in sample.training.items():
            if name in existing:
                tr.state = kueue.workload_state(by_job.get(name))
        sample.queue_gpus = kueue.queue_gpus(cluster_queue)
    return sample


class Observer:
    """Takes samples from the apiserver and the providers' ledgers."""

    def __init__(
        self,
        s: Scenario,
        kube: KubeClient,
        ledgers: LedgerReader,
        *,
        virtual_node: str,
        gate_taint_key: str,
        admin_url: str = "",
    ) -> None:
        self.s, self.kube, self.ledgers = s, kube, ledgers
        self.virtual_node, self.gate_taint_key = virtual_node, gate_taint_key
        self.admin_url = admin_url
        self._http = httpx.AsyncClient(timeout=2.0)
        #: training via Kueue: each Job's admission record, folded from every sample
        self.admissions = {t.name: Admission(t.name, t.gpus) for _, t in s.trainings()}

    async def close(self) -> None:
        await self._http.aclose()

    async def service_spend_rate(self) -> float | None:
        """What vkprovider itself holds as spend per hour (its budgets in admin ``/state``)."""
        if not self.admin_url:
            return None
        try:
            state = (await self._http.get(f"{self.admin_url}/state")).json()
            budgets = state["placement"]["budgets"]
            return float(sum(float(b.get("spent") or 0.0) for b in budgets.values()))
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            return None

    async def _kueue(self) -> tuple[list[JSON], list[JSON], list[JSON], JSON | None]:
        """Training pods, Jobs and Workloads in the LocalQueue's namespace, and the ClusterQueue."""
        ns = kueue.NAMESPACE
        pods = (await self.kube.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
        jobs = (await self.kube.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs"))["items"]
        workloads = (await self.kube.request("GET", f"{kueue.API}/namespaces/{ns}/workloads"))["items"]
        try:
            queue = await self.kube.request("GET", f"{kueue.API}/clusterqueues/{kueue.CLUSTER_QUEUE}")
        except KubeNotFound:
            queue = None
        return pods, jobs, workloads, queue

    async def sample(self) -> Sample:
        ns = self.s.namespace
        pods_at = time.time()
        pods = (await self.kube.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
        extra: dict[str, Any] = {}
        if self.s.training.kueue:
            training_pods, jobs, workloads, queue = await self._kueue()
            kueue.update(self.admissions, jobs, workloads, training_pods, TRAINING_LABEL)
            pods = pods if ns == kueue.NAMESPACE else pods + training_pods
            extra = {"jobs": jobs, "kueue_workloads": workloads, "cluster_queue": queue}
        nodes = (await self.kube.request("GET", "/api/v1/nodes"))["items"]
        deployments = (await self.kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments"))["items"]
        t = time.time()
        entries = await self.ledgers.read_all()
        service_rate = await self.service_spend_rate()
        sample = sample_from(
            self.s,
            t=t,
            pods=pods,
            nodes=nodes,
            deployments=deployments,
            virtual_node=self.virtual_node,
            gate_taint_key=self.gate_taint_key,
            ledger=[e for es in entries.values() for e in es],
            **extra,
        )
        sample.service_spend_rate = service_rate
        sample.pods_at = pods_at
        return sample
