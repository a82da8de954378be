"""What the runner does to the world: apply the workloads, and turn timeline events into API
calls (a training Job created and later deleted, a provider's capacity or outage changed, a
node cordoned and uncordoned, a Deployment scaled). Each call returns the :class:`Action` to
record; failures of the world (an API error) are raised, the runner logs them as events.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict, KubeNotFound
from vkprovider.sim import kueue, manifests
from vkprovider.sim.record import Action
from vkprovider.sim.scenario import CapacityChange, LoadPoint, Maintenance, Outage, Scale, Scenario, Training
from vkprovider.sim.stack import node_names

JSON = dict[str, Any]


@dataclass
class Step:
    """One thing to do at ``at`` real seconds after the start of the day."""

    at: float
    label: str
    run: Callable[[], Awaitable[Action]]


class World:
    def __init__(self, s: Scenario, kube: KubeClient, clouds: dict[str, str], *, real_jobs: bool) -> None:
        self.s, self.kube, self.clouds = s, kube, clouds
        #: True: training is a batch/v1 Job (kwok holds its pods Running via a stage delay);
        #: False: bare pods, because this cluster's kwok would complete Job pods at once.
        self.real_jobs = real_jobs
        self.http = httpx.AsyncClient(timeout=10.0)
        #: provider -> instance limit set by a capacity event, re-applied as instances end
        self.limits: dict[str, int] = {}

    async def close(self) -> None:
        await self.http.aclose()

    async def create(self, obj: JSON) -> None:
        try:
            await self.kube.request("POST", manifests.collection_path(obj), body=obj)
        except KubeConflict:
            name = obj["metadata"]["name"]
            current = await self.kube.request("GET", f"{manifests.collection_path(obj)}/{name}")
            obj = {
                **obj,
                "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            await self.kube.request("PUT", f"{manifests.collection_path(obj)}/{name}", body=obj)

    async def setup(self) -> None:
        """Namespace, PriorityClasses, then each workload's Service, Deployment, PDB and HPA."""
        if self.s.namespace != "default":
            await self.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.s.namespace}}
            )
        for value in sorted({t.priority for _, t in self.s.trainings()}):
            await self.create(manifests.priority_class(value))
        for w in self.s.workloads:
            await self.create(manifests.service(self.s, w))
            await self.create(manifests.inference_deployment(self.s, w))
            for extra in (manifests.pdb(self.s, w), manifests.hpa(self.s, w)):
                if extra is not None:
                    await self.create(extra)

    async def cluster_ip(self, workload: str) -> str:
        """The ClusterIP the apiserver gave the workload's Service."""
        path = f"/api/v1/namespaces/{self.s.namespace}/services/{workload}"
        return str((await self.kube.request("GET", path))["spec"]["clusterIP"])

    def steps(self) -> list[Step]:
        """The timeline as real-time steps, each event's end (training, outage, cordon) included."""
        out: list[Step] = []
        for event in self.s.events():
            at = self.s.real(event.at)
            body = event.body
            if isinstance(body, Training):
                out.append(Step(at, f"training {body.name} arrives", self._bind(self.start_training, body)))
                if not self.s.training.kueue:  # through Kueue the Job runs its duration from admission
                    end = self.s.real(event.at + body.duration)
                    out.append(Step(end, f"training {body.name} ends", self._bind(self.end_training, body)))
            elif isinstance(body, CapacityChange):
                out.append(
                    Step(at, f"{body.provider} capacity {body.capacity}", self._bind(self.set_capacity, body))
                )
            elif isinstance(body, Outage):
                out.append(Step(at, f"{body.provider} outage", self._bind(self.outage, body, True)))
                if body.duration:
                    out.append(
                        Step(
                            self.s.real(event.at + body.duration),
                            f"{body.provider} back",
                            self._bind(self.outage, body, False),
                        )
                    )
            elif isinstance(body, Maintenance):
                out.append(Step(at, f"node {body.node} cordoned", self._bind(self.cordon, body, True)))
                if body.duration:
                    done = self.s.real(event.at + body.duration)
                    out.append(Step(done, f"node {body.node} back", self._bind(self.cordon, body, False)))
            elif isinstance(body, Scale):
                out.append(Step(at, f"{body.workload} -> {body.replicas}", self._bind(self.scale, body)))
        for point in self.s.load:
            out.append(
                Step(self.s.real(point.at), f"load {point.cpu_cores:g} cores", self._bind(self.load, point))
            )
        return sorted(out, key=lambda step: step.at)

    @staticmethod
    def _bind(fn: Callable[..., Awaitable[Action]], *args: Any) -> Callable[[], Awaitable[Action]]:
        async def call() -> Action:
            return await fn(*args)

        return call

    async def start_training(self, t: Training) -> Action:
        if self.s.training.kueue:
            # queued until Kueue admits the whole gang; each pod then runs its duration and
            # completes (kwok), the Workload finishes and the queue admits the next one
            await self.create(manifests.training_job(self.s, t, run_seconds=self.s.real(t.duration)))
            pods = t.gpus // self.s.gpus_per_pod(t)
            detail = f"{t.gpus} GPUs in {pods} pods, queued in LocalQueue {kueue.LOCAL_QUEUE}"
            return Action(time.time(), "training-start", t.name, detail, float(t.gpus))
        if self.real_jobs:
            # kwok would complete the pods after their run; the runner ends the Job on schedule
            # first (a pod that waited for preemption starts late), so the day stays as written.
            run = self.s.real(t.duration) + self.s.clock.real_seconds
            await self.create(manifests.training_job(self.s, t, run_seconds=run))
        else:
            for pod in manifests.training_pods(self.s, t):
                await self.create(pod)
        pods = t.gpus // self.s.gpus_per_pod(t)
        detail = f"{t.gpus} GPUs in {pods} pods, priority {t.priority}"
        return Action(time.time(), "training-start", t.name, detail, float(t.gpus))

    async def end_training(self, t: Training) -> Action:
        ns = self.s.namespace
        if self.real_jobs:
            with contextlib.suppress(KubeNotFound):
                path = f"/apis/batch/v1/namespaces/{ns}/jobs/{t.name}"
                await self.kube.request("DELETE", path, query={"propagationPolicy": "Background"})
        else:
            for pod in manifests.training_pods(self.s, t):
                with contextlib.suppress(KubeNotFound):
                    path = f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}"
                    await self.kube.request("DELETE", path, query={"gracePeriodSeconds": 0})
        return Action(time.time(), "training-end", t.name, "job done, its pods deleted", float(t.gpus))

    async def in_use(self, provider: str) -> int:
        resp = await self.http.get(f"{self.clouds[provider]}/admin/deployments")
        resp.raise_for_status()
        return len(resp.json())

    async def enforce_limits(self) -> None:
        """Free instances = limit - running: fakecloud gives capacity back on every delete, so a
        limit is re-applied each sample (a deploy can slip in between two samples)."""
        for provider, limit in self.limits.items():
            free = max(0, limit - await self.in_use(provider))
            offers = (await self.http.get(f"{self.clouds[provider]}/admin/offers")).json()
            for offer_id, capacity in offers.items():
                if capacity != free:
                    resp = await self.http.put(
                        f"{self.clouds[provider]}/admin/offers/{offer_id}/capacity", json={"capacity": free}
                    )
                    resp.raise_for_status()

    async def set_capacity(self, c: CapacityChange) -> Action:
        self.limits[c.provider] = c.capacity
        await self.enforce_limits()
        return Action(
            time.time(), "capacity", c.provider, f"at most {c.capacity} instances", float(c.capacity)
        )

    async def outage(self, o: Outage, on: bool) -> Action:
        resp = await self.http.patch(f"{self.clouds[o.provider]}/admin/knobs", json={"outage": on})
        resp.raise_for_status()
        kind = "outage-start" if on else "outage-end"
        return Action(time.time(), kind, o.provider, "every API call fails" if on else "API answers again")

    async def load(self, point: LoadPoint) -> Action:
        """Every provider's containers run at ``cpu_cores`` from now on: the usage the kubelet API
        reports for external replicas, so metrics-server and the HPAs see the traffic change."""
        for url in self.clouds.values():
            resp = await self.http.put(f"{url}/admin/load", json={"cpu_cores": point.cpu_cores})
            resp.raise_for_status()
        detail = f"{point.cpu_cores:g} CPU cores per external replica"
        return Action(time.time(), "load", "traffic", detail, point.cpu_cores)

    async def cordon(self, m: Maintenance, on: bool) -> Action:
        name = node_names(self.s)[m.node]
        await self.kube.request(
            "PATCH", f"/api/v1/nodes/{name}", body={"spec": {"unschedulable": on}}, content_type=MERGE_PATCH
        )
        return Action(time.time(), "cordon" if on else "uncordon", name, "maintenance" if on else "back")

    async def scale(self, sc: Scale) -> Action:
        path = f"/apis/apps/v1/namespaces/{self.s.namespace}/deployments/{sc.workload}"
        await self.kube.request(
            "PATCH", path, body={"spec": {"replicas": sc.replicas}}, content_type=MERGE_PATCH
        )
        return Action(time.time(), "scale", sc.workload, f"{sc.replicas} replicas", float(sc.replicas))
