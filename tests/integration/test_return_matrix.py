"""The return home on the workloads people run: one burst-and-return cycle per row, with the real
scheduler, the real Descheduler v0.36.0 running the shipped policy, fakecloud behind the virtual
node and the gate's wave planner marking what may come home.

Each row holds local GPUs with high-priority blockers (training), creates its workloads (what
does not fit locally bursts to the virtual node), then frees the blockers and waits for the
return to settle. Per row, counted from the apiserver (the Descheduler's ``Descheduled`` Events,
the pods seen on the virtual node every second):

* every replica that fits locally came home and none that does not was evicted
  (evictions == came home, per workload as the row expects);
* no replica was evicted twice;
* no pod was (re)created on the virtual node after the return began.

The table it prints (``pytest -s``) is the closing note's matrix.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration.gate_support import apply, blocker, example, inference, is_ready, running_gate
from tests.support import eventually
from vkprovider.devcluster import Cluster, kwok
from vkprovider.devcluster.descheduler import return_home_policy, start_descheduler, stop_descheduler
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.taint import TaintWriter
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
HOST = "kubernetes.io/hostname"
PRODUCT = "nvidia.com/gpu.product"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
TABLE: list[str] = []
#: ``VKPROVIDER_MATRIX_BEFORE=1``: the same cycles with the pre-issue-23 return (no marks, the old
#: policy: includedTaints key=value, nodeFit, default protections) for the closing note's "before"
#: column; it only prints what happened, asserting nothing about the return.
BEFORE = os.environ.get("VKPROVIDER_MATRIX_BEFORE") == "1"
OLD_POLICY_EVICTOR = {"nodeFit": True}


@pytest.fixture(scope="module")
async def matrix_cluster() -> AsyncIterator[Cluster]:
    started = await Cluster.start(f"matrix-{os.getpid()}", gpu_nodes=2, pod_delays=True)
    try:
        yield started
    finally:
        await started.stop(remove=not os.environ.get("VKPROVIDER_TEST_KEEP_CLUSTER"))
        header = "| case | evictions | came home | stayed | re-created on vk | gate flips | return took |"
        print("\n" + "\n".join([header, *TABLE]))


@pytest.fixture(scope="module")
async def vnode(matrix_cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(matrix_cluster, {"cheap": cloud_config("cheap", 1.0, capacity=32)})
    assert node.kube is not None
    for doc in example("priority-classes.yaml"):
        await apply(node.kube, "", doc)
    yield node
    await node.stop()


# --- workloads ------------------------------------------------------------------------------


def deployment(name: str, replicas: int, *, pdb: bool = True, **spec: Any) -> list[JSON]:
    """The example inference Deployment (prefers local, tolerates the virtual node, not the
    gate's taint; ready 3 s after binding) with ``spec`` merged into its pod spec."""
    docs = inference(replicas, ready_delay="3s", name=name)
    docs[0]["spec"]["template"]["spec"].update(copy.deepcopy(spec))
    return docs if pdb else docs[:1]


def vllm(name: str, replicas: int) -> list[JSON]:
    """vLLM's own manifest shape: /dev/shm as a memory emptyDir and a model-cache emptyDir."""
    docs = deployment(
        name,
        replicas,
        volumes=[
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            {"name": "cache", "emptyDir": {}},
        ],
    )
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "cache", "mountPath": "/root/.cache/huggingface"},
    ]
    return docs


def with_tolerations(docs: list[JSON], *extra: JSON) -> list[JSON]:
    spec = docs[0]["spec"]["template"]["spec"]
    spec["tolerations"] = [*spec["tolerations"], *extra]
    return docs


def job(name: str) -> JSON:
    """A one-pod Job that may burst (tolerates the virtual node): never to be evicted."""
    (doc,) = copy.deepcopy(example("training-job.yaml"))
    doc["metadata"]["name"] = name
    doc["spec"]["parallelism"] = doc["spec"]["completions"] = 1
    template = doc["spec"]["template"]
    template["metadata"] = {"labels": {"app": name}, "annotations": {kwok.COMPLETE_DELAY_ANNOTATION: "900s"}}
    spec = template["spec"]
    spec["priorityClassName"] = "inference-standard"
    spec.pop("nodeSelector", None)  # the example pins training to the local pool
    spec["tolerations"] = [
        {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}
    ]
    spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    return doc


@dataclass
class Workload:
    name: str
    docs: list[JSON]
    home: int  #: replicas expected to come home
    stay: int  #: replicas expected to stay on the virtual node


@dataclass
class Row:
    name: str
    workloads: Callable[[str], list[Workload]]  #: given the virtual node's name
    burst: dict[int, int]  #: node index -> GPUs training holds during the burst (freed after)
    keep: dict[int, int] = field(default_factory=dict)  #: GPUs held throughout
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: list[JSON] = field(default_factory=list)
    extra: Callable[[list[str]], list[JSON]] = lambda nodes: []
    blocker_tolerations: list[JSON] = field(default_factory=list)


def spread_row(vk: str) -> list[Workload]:
    constraint = {
        "maxSkew": 1,
        "topologyKey": HOST,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    # 1 GPU free per node: 2 local + 2 out. Freed: the first comes home (1/1/1 with the virtual
    # node a domain of its own), the last would leave the virtual node at 0 against 2: it stays
    return [Workload("spread", deployment("spread", 4, topologySpreadConstraints=[constraint]), 1, 1)]


def anti_row(vk: str) -> list[Workload]:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "noisy"}}}
            ]
        }
    }
    docs = deployment("anti", 5)
    docs[0]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"] = anti["podAntiAffinity"]
    # node 0 runs a noisy pod (excluded), node 1 keeps 5 of 8 GPUs: 3 come home, 2 stay
    return [Workload("anti", docs, 3, 2)]


def noisy(nodes: list[str]) -> list[JSON]:
    return [blocker("noisy", 0, node=nodes[0])]


def pinned_row(vk: str) -> list[Workload]:
    return [
        Workload("pinned", deployment("pinned", 2, nodeName=vk), 0, 2),
        Workload("plain", deployment("plain", 2), 2, 0),
    ]


def two_types_row(vk: str) -> list[Workload]:
    h100_or_cloud = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["H100-SXM-80GB"]}]},
                    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["virtual-kubelet"]}]},
                ]
            }
        }
    }
    h100 = deployment("h100", 2)
    h100[0]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"].update(h100_or_cloud["nodeAffinity"])
    return [Workload("any-gpu", deployment("any-gpu", 2), 2, 0), Workload("h100", h100, 0, 2)]


def job_row(vk: str) -> list[Workload]:
    return [
        Workload("batch", [job("batch")], 0, 1),
        Workload("no-pdb", deployment("no-pdb", 2, pdb=False), 0, 2),
        Workload("plain", deployment("plain", 2), 2, 0),
    ]


ROWS = [
    Row("vLLM /dev/shm + cache emptyDir", lambda vk: [Workload("vllm", vllm("vllm", 4), 4, 0)], {0: 8, 1: 8}),
    Row("hostname spread DoNotSchedule", spread_row, {0: 7, 1: 7}),
    Row("required anti-affinity", anti_row, {0: 8, 1: 3}, keep={1: 5}, extra=noisy),
    Row("template nodeName = virtual node", pinned_row, {0: 8, 1: 8}),
    Row(
        "GPU nodes tainted nvidia.com/gpu",
        lambda vk: [Workload("tol", with_tolerations(deployment("tol", 3), GPU_TOLERATION), 3, 0)],
        {0: 8, 1: 8},
        node_taints=[GPU_TAINT],
        blocker_tolerations=[GPU_TOLERATION],
    ),
    Row(
        "A100 local, H100-only stays out",
        two_types_row,
        {0: 8, 1: 8},
        node_labels={PRODUCT: "A100-SXM4-80GB"},
    ),
    Row("Job + PDB-less Deployment", job_row, {0: 8, 1: 8}),
]


# --- the cycle ------------------------------------------------------------------------------


async def create(kube: KubeClient, ns: str, doc: JSON) -> None:
    if doc["kind"] == "Job":
        await kube.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=doc)
    else:
        await apply(kube, ns, doc)


async def ns_pods(kube: KubeClient, ns: str) -> list[JSON]:
    return list((await kube.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"])


def app(pod: JSON) -> str:
    return str((pod["metadata"].get("labels") or {}).get("app", ""))


async def evictions(kube: KubeClient, ns: str) -> list[str]:
    """The pods the Descheduler evicted in ``ns``, one entry per eviction (its Events)."""
    body = await kube.request("GET", f"/api/v1/namespaces/{ns}/events")
    return [
        str(e["involvedObject"]["name"])
        for e in body["items"]
        if "by sigs.k8s.io/descheduler" in (e.get("message") or e.get("note") or "")
        and "failed" not in (e.get("message") or "")
        for _ in range(max(1, int(e.get("count") or 1)))
    ]


@contextlib.asynccontextmanager
async def node_changes(kube: KubeClient, nodes: list[str], row: Row) -> AsyncIterator[None]:
    """The row's labels and taints on the local nodes, restored afterwards."""
    saved = {}
    for name in nodes:
        body = await kube.request("GET", f"/api/v1/nodes/{name}")
        saved[name] = (dict(body["metadata"].get("labels") or {}), list(body["spec"].get("taints") or []))
        patch: JSON = {"metadata": {"labels": row.node_labels}} if row.node_labels else {}
        if row.node_taints:
            patch["spec"] = {"taints": [*saved[name][1], *row.node_taints]}
        if patch:
            await kube.request("PATCH", f"/api/v1/nodes/{name}", body=patch, content_type=MERGE_PATCH)
    try:
        yield
    finally:
        for name, (labels, taints) in saved.items():
            restore: JSON = {
                "metadata": {"labels": {k: labels.get(k) for k in row.node_labels}},
                "spec": {"taints": taints or None},
            }
            await kube.request("PATCH", f"/api/v1/nodes/{name}", body=restore, content_type=MERGE_PATCH)


async def wait(
    check: Callable[[], Awaitable[bool]], timeout: float, what: Callable[[], Awaitable[str]]
) -> None:
    try:
        await eventually(check, timeout=timeout, interval=1)
    except TimeoutError:
        raise AssertionError(await what()) from None


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
async def test_return_matrix(matrix_cluster: Cluster, vnode: VirtualNode, row: Row) -> None:
    kube = vnode.kube
    assert kube is not None
    vk = vnode.name
    nodes = matrix_cluster.gpu_nodes
    ns = f"mx-{ROWS.index(row)}-{os.getpid() % 10000}"
    await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    await eventually(lambda: _has_default_sa(kube, ns), timeout=30)
    workloads = row.workloads(vk)
    seen_on_vk: dict[str, set[str]] = {}  #: app -> pod UIDs ever seen on the virtual node
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):
                for p in await ns_pods(kube, ns):
                    if p["spec"].get("nodeName") == vk:
                        seen_on_vk.setdefault(app(p), set()).add(p["metadata"]["uid"])
            await asyncio.sleep(1)

    async def layout() -> str:
        pods = await ns_pods(kube, ns)
        return f"{row.name}: " + ", ".join(
            f"{p['metadata']['name']}@{p['spec'].get('nodeName')}:{p['status'].get('phase')}"
            f"{'/Ready' if is_ready(p) else ''}"
            for p in pods
        )

    async with node_changes(kube, nodes, row):
        for doc in row.extra(nodes):
            await apply(kube, ns, doc)
        for index, gpus in row.keep.items():
            await apply(
                kube,
                ns,
                blocker(f"keep-{index}", gpus, node=nodes[index], tolerations=row.blocker_tolerations),
            )
        for index, gpus in row.burst.items():
            await apply(
                kube,
                ns,
                blocker(f"burst-{index}", gpus, node=nodes[index], tolerations=row.blocker_tolerations),
            )

        async def blockers_running() -> bool:
            running = [p for p in await ns_pods(kube, ns) if app(p).startswith(("burst-", "keep-", "noisy"))]
            want = len(row.burst) + len(row.keep) + len(row.extra(nodes))
            return len([p for p in running if p["status"].get("phase") == "Running"]) == want

        await wait(blockers_running, 120, layout)
        policy = return_home_policy(namespaces=[ns], min_pod_age="3s")
        if BEFORE:
            profile = policy["profiles"][0]
            profile["pluginConfig"][0]["args"] = OLD_POLICY_EVICTOR
            profile["pluginConfig"][1]["args"]["includedTaints"] = ["local-capacity=available"]
        descheduler = await start_descheduler(matrix_cluster, policy, interval_seconds=2)
        sampler = asyncio.create_task(sample())
        try:
            async with running_gate(
                kube,
                vk,
                taint_at_free_gpus=1,
                untaint_below_free_gpus=1,
                return_home={"come_home_seconds": 60, "enabled": not BEFORE},
            ) as gate:
                for w in workloads:
                    for doc in w.docs:
                        await create(kube, ns, doc)

                async def burst_settled() -> bool:
                    pods = await ns_pods(kube, ns)
                    for w in workloads:
                        mine = [p for p in pods if app(p) == w.name]
                        out = [p for p in mine if p["spec"].get("nodeName") == vk]
                        running = [p for p in mine if is_ready(p) or p["status"].get("phase") == "Succeeded"]
                        if len(out) < w.home + w.stay or len(running) < len(mine):
                            return False
                    return True

                await wait(burst_settled, 180, layout)
                before = {
                    p["metadata"]["uid"] for p in await ns_pods(kube, ns) if p["spec"].get("nodeName") == vk
                }
                local_before = {
                    w.name: sum(
                        1
                        for p in await ns_pods(kube, ns)
                        if app(p) == w.name and p["spec"].get("nodeName") != vk and is_ready(p)
                    )
                    for w in workloads
                }
                flips_before = len(gate.flips)
                started = time.monotonic()
                for index in row.burst:  # training ends: the GPUs are free
                    await kube.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/burst-{index}")

                async def returned() -> bool:
                    pods = await ns_pods(kube, ns)
                    for w in workloads:
                        mine = [p for p in pods if app(p) == w.name]
                        out = [p for p in mine if p["spec"].get("nodeName") == vk]
                        home = [
                            p for p in mine if p["spec"].get("nodeName") not in (vk, None) and is_ready(p)
                        ]
                        if len(out) != w.stay or len(home) - local_before[w.name] != w.home:
                            return False
                    return True

                if BEFORE:
                    with contextlib.suppress(AssertionError):
                        await wait(returned, 90, layout)
                else:
                    await wait(returned, 240, layout)
                settled = time.monotonic()
                await asyncio.sleep(15)  # nothing more moves: no late eviction, no re-creation
                assert BEFORE or await returned(), await layout()
                pods_now = await ns_pods(kube, ns)
                came_home = sum(
                    sum(
                        1
                        for p in pods_now
                        if app(p) == w.name and p["spec"].get("nodeName") not in (vk, None) and is_ready(p)
                    )
                    - local_before[w.name]
                    for w in workloads
                )
                flips = len(gate.flips) - flips_before
                snapshot = gate.snapshot()
        finally:
            stop.set()
            await sampler
            await stop_descheduler(matrix_cluster, descheduler)
            await TaintWriter(kube, vk, TaintConfig()).set(False)

        evicted = await evictions(kube, ns)
        after = {p["metadata"]["uid"] for p in await ns_pods(kube, ns) if p["spec"].get("nodeName") == vk}
        recreated = set().union(*seen_on_vk.values()) - before
        await kube.request("DELETE", f"/api/v1/namespaces/{ns}")
        await eventually(lambda: _empty(kube, ns), timeout=120)

    home = sum(w.home for w in workloads)
    stayed = len(after & before)
    TABLE.append(
        f"| {row.name}{' (before)' if BEFORE else ''} | {len(evicted)} | {came_home} | {stayed} "
        f"| {len(recreated)} | {flips} | {settled - started:.0f}s |"
    )
    if BEFORE:
        return
    assert len(evicted) == len(set(evicted)), f"a replica evicted twice: {evicted}"
    assert len(evicted) == home, f"evicted {evicted}, {home} came home; gate {snapshot.get('return_home')}"
    assert not recreated, f"{len(recreated)} pod(s) created on the virtual node during the return"
    assert stayed == sum(w.stay for w in workloads)


async def _has_default_sa(kube: KubeClient, ns: str) -> bool:
    with contextlib.suppress(Exception):
        await kube.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")
        return True
    return False


async def _empty(kube: KubeClient, ns: str) -> bool:
    with contextlib.suppress(Exception):
        return not await ns_pods(kube, ns)
    return True
