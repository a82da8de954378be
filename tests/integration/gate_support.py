"""The return path's test bench: a cluster whose kwok pods take time (model loading, training),
the deploy/examples manifests, the gate in-process, and a 1 s sampler that writes the timeline."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support import background, edit_node_taints
from vkprovider.devcluster import kwok
from vkprovider.gate.config import GateConfig
from vkprovider.gate.loop import Gate
from vkprovider.gate.signal import Reading
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeConflict
from vkprovider.sim.local import VirtualNode

JSON = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
GATE_TAINT = "local-capacity"
FOREIGN_TAINT = {"key": "team.example/maintenance", "value": "planned", "effect": "PreferNoSchedule"}

PATHS = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
}


def example(name: str) -> list[JSON]:
    return [doc for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc]


async def apply(kube: KubeClient, namespace: str, manifest: JSON) -> None:
    path = PATHS[manifest["kind"]].format(ns=namespace)
    with contextlib.suppress(KubeConflict):  # cluster-scoped objects may exist already
        await kube.request("POST", path, body=manifest)


async def create_namespace(kube: KubeClient) -> str:
    name = f"rh-{uuid.uuid4().hex[:8]}"
    await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    for _ in range(200):
        with contextlib.suppress(Exception):
            await kube.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            return name
        await asyncio.sleep(0.1)
    raise TimeoutError("default ServiceAccount never appeared")


def inference(replicas: int, ready_delay: str = "10s", name: str = "inference") -> list[JSON]:
    """The example Deployment + PDB, with kwok's ready delay (a model loading) on its pods."""
    deployment, pdb = (copy.deepcopy(d) for d in example("inference-local-first.yaml"))
    deployment["metadata"]["name"] = pdb["metadata"]["name"] = name
    deployment["spec"]["replicas"] = replicas
    template = deployment["spec"]["template"]
    template["metadata"]["annotations"][kwok.READY_DELAY_ANNOTATION] = ready_delay
    template["spec"]["terminationGracePeriodSeconds"] = 2
    for doc in (deployment, pdb):
        doc["metadata"]["labels"] = {"app": name}
    deployment["spec"]["selector"]["matchLabels"] = {"app": name}
    template["metadata"]["labels"] = {"app": name}
    pdb["spec"]["selector"]["matchLabels"] = {"app": name}
    return [deployment, pdb]


def training(run_for: str = "25s", gpus: int = 8, parallelism: int = 2, name: str = "training") -> JSON:
    (job,) = copy.deepcopy(example("training-job.yaml"))
    job["metadata"]["name"] = name
    job["spec"]["parallelism"] = job["spec"]["completions"] = parallelism
    template = job["spec"]["template"]
    template["metadata"]["annotations"] = {kwok.COMPLETE_DELAY_ANNOTATION: run_for}
    template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    return job


def blocker(name: str, gpus: int, *, node: str | None = None, tolerations: list[JSON] | None = None) -> JSON:
    """A high-priority local Deployment holding ``gpus`` GPUs on one node (never completes);
    ``node`` pins it to a node by hostname, ``tolerations`` replace the training Job's."""
    (job,) = copy.deepcopy(example("training-job.yaml"))
    spec = job["spec"]["template"]["spec"]
    spec["restartPolicy"] = "Always"
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        spec["tolerations"] = tolerations or []
    spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


async def pods(kube: KubeClient, namespace: str, app: str) -> list[JSON]:
    body = await kube.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": f"app={app}"}
    )
    return list(body["items"])


def is_ready(pod: JSON) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False  # the PDB does not count a terminating pod as healthy either
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def node_taints(kube: KubeClient, node: str) -> list[JSON]:
    body = await kube.request("GET", f"/api/v1/nodes/{node}")
    return list((body.get("spec") or {}).get("taints") or [])


async def add_foreign_taint(kube: KubeClient, node: str) -> None:
    """Another writer's taint, written the careful way (resourceVersion-guarded, redone on a 409)."""
    await edit_node_taints(kube, node, lambda taints: [*taints, FOREIGN_TAINT])


_EVICTED = re.compile(r'^I(\d{4}) (\d\d:\d\d:\d\d\.\d+) .*"Evicted pod" pod="([^"]+)"')


def descheduler_evictions(log: Path, namespace: str) -> list[tuple[float, str]]:
    """(wall time, pod name) of every eviction the descheduler logged in ``namespace``."""
    found = []
    year = time.gmtime().tm_year
    for line in log.read_text(errors="replace").splitlines():
        match = _EVICTED.match(line)
        if match and match[3].startswith(f"{namespace}/"):
            stamp = datetime.strptime(f"{year}{match[1]} {match[2]}", "%Y%m%d %H:%M:%S.%f")
            found.append((stamp.replace(tzinfo=UTC).timestamp(), match[3].split("/", 1)[1]))
    return found


async def event_times(kube: KubeClient, namespace: str, reason: str) -> list[tuple[float, str]]:
    """(wall time, object name) of the Events with ``reason`` in ``namespace`` (e.g. the
    scheduler's ``Preempted``)."""
    body = await kube.request("GET", f"/api/v1/namespaces/{namespace}/events")
    found = []
    for event in body["items"]:
        if event.get("reason") != reason:
            continue
        stamp = event.get("eventTime") or event.get("firstTimestamp") or event.get("lastTimestamp")
        if stamp:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            found.append((moment, str(event["involvedObject"]["name"])))
    return sorted(found)


def has_foreign(taints: list[JSON]) -> bool:
    return any(
        t.get("key") == FOREIGN_TAINT["key"] and t.get("value") == FOREIGN_TAINT["value"] for t in taints
    )


async def cloud_deployments(vnode: VirtualNode) -> int:
    count = 0
    for cloud in vnode.clouds.values():
        async with httpx.AsyncClient(base_url=cloud.url) as client:
            resp = await client.get("/admin/deployments")
            resp.raise_for_status()
            count += len(resp.json())
    return count


@contextlib.asynccontextmanager
async def running_gate(kube: KubeClient, node: str, **overrides: Any) -> AsyncIterator[Gate]:
    """The real gate loop, in-process (as ``vkprovider serve`` runs it), with test timings."""
    settings: dict[str, Any] = {
        "taint_at_free_gpus": 2,
        "untaint_below_free_gpus": 1,
        "dwell_seconds": 3,
        "min_flip_interval_seconds": 5,
        "interval_seconds": 1,
        "signal_timeout_seconds": 10,
        **overrides,
    }
    gate = Gate(kube, GateConfig.model_validate(settings), node)
    await gate.preflight()
    async with background(gate.run()):
        yield gate


@dataclass
class Sample:
    at: float
    tainted: bool
    foreign: bool
    ready_local: set[str]
    ready_external: set[str]
    on_virtual: set[str]
    terminating_external: set[str]
    training: dict[str, str]  #: pod -> phase (+ "nominated")
    deployments: int


@dataclass
class Timeline:
    """Samples the world every second; turns changes into a readable timeline."""

    kube: KubeClient
    namespace: str
    vnode: VirtualNode
    app: str = "inference"
    samples: list[Sample] = field(default_factory=list)
    entries: list[tuple[float, str]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    wall_started: float = field(default_factory=time.time)
    gate: Gate | None = None
    _task: asyncio.Task[None] | None = None

    def note(self, text: str, *, wall: float | None = None) -> None:
        at = time.monotonic() - self.started if wall is None else wall - self.wall_started
        self.entries.append((at, text))

    @property
    def lines(self) -> list[str]:
        return [f"t+{at:6.1f}s  {text}" for at, text in sorted(self.entries, key=lambda e: e[0])]

    async def sample(self) -> Sample:
        taints = await node_taints(self.kube, self.vnode.name)
        inf = await pods(self.kube, self.namespace, self.app)
        train = await pods(self.kube, self.namespace, "training")
        name = self.vnode.name

        def short(p: JSON) -> str:
            return str(p["metadata"]["name"]).rsplit("-", 1)[-1]

        return Sample(
            at=time.monotonic(),
            tainted=any(t.get("key") == GATE_TAINT for t in taints),
            foreign=has_foreign(taints),
            ready_local={short(p) for p in inf if is_ready(p) and p["spec"].get("nodeName") != name},
            ready_external={short(p) for p in inf if is_ready(p) and p["spec"].get("nodeName") == name},
            on_virtual={short(p) for p in inf if p["spec"].get("nodeName") == name},
            terminating_external={
                short(p)
                for p in inf
                if p["spec"].get("nodeName") == name and p["metadata"].get("deletionTimestamp")
            },
            training={
                short(p): (
                    p["status"].get("phase", "?")
                    + ("/nominated" if p["status"].get("nominatedNodeName") else "")
                )
                for p in train
            },
            deployments=await cloud_deployments(self.vnode),
        )

    def _diff(self, old: Sample | None, new: Sample) -> None:
        if old is None or old.tainted != new.tainted:
            self.note(
                f"virtual node {'TAINTED' if new.tainted else 'untainted'} (foreign taint kept: {new.foreign})"
            )
        if old is None or old.training != new.training:
            self.note(f"training pods: {new.training or '-'}")
        for p in sorted(new.terminating_external - (old.terminating_external if old else set())):
            self.note(f"external replica {p} terminating (evicted)")
        for p in sorted((old.on_virtual if old else set()) - new.on_virtual):
            self.note(f"external replica {p} gone from the virtual node (evicted)")
        for p in sorted(new.ready_external - (old.ready_external if old else set())):
            self.note(f"replica {p} Ready on the virtual node")
        for p in sorted(new.ready_local - (old.ready_local if old else set())):
            self.note(f"replica {p} Ready locally")
        if old is None or old.deployments != new.deployments:
            self.note(f"fakecloud deployments: {new.deployments}")
        ready = len(new.ready_local) + len(new.ready_external)
        if old is None or ready != len(old.ready_local) + len(old.ready_external):
            self.note(
                f"Ready replicas: {ready} ({len(new.ready_local)} local, {len(new.ready_external)} external)"
            )

    async def _loop(self) -> None:
        previous = None
        while True:
            with contextlib.suppress(Exception):
                current = await self.sample()
                self._diff(previous, current)
                self.samples.append(current)
                previous = current
            await asyncio.sleep(1.0)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def finish(self, descheduler_log: Path) -> list[tuple[float, str]]:
        """Stop sampling; merge in the descheduler's evictions, the scheduler's preemptions and
        the gate's flips (with their readings). Returns the evictions."""
        await self.stop()
        evictions = descheduler_evictions(descheduler_log, self.namespace)
        for wall, pod in evictions:
            self.note(f"descheduler evicted {pod}", wall=wall)
        with contextlib.suppress(Exception):
            for wall, pod in await event_times(self.kube, self.namespace, "Preempted"):
                self.note(f"scheduler preempted {pod}", wall=wall)
        for flip in self.gate.flips if self.gate else []:
            self.note(f"gate {flip['direction']}: {flip['reason']}: {flip['message']}", wall=flip["at"])
        return evictions

    def since(self, moment: float) -> list[Sample]:
        return [s for s in self.samples if s.at >= moment]


class FixedSignal:
    """A signal that always reads ``free`` GPUs: the gate's writes under test, not a signal."""

    kind = "fixed"

    def __init__(self, free: float) -> None:
        self.free = free

    async def start(self) -> None:
        return None

    async def read(self) -> Reading:
        return Reading(free_gpus=self.free)

    async def close(self) -> None:
        return None
