"""Acceptance: a one-minute simulated day end to end on the real control plane, and its report
checked against the truth (the providers' ledgers, the apiserver, the PNG itself). quick.yaml
sends training through real Kueue on the same control plane (no extra cluster): the admission
timeline and the gang rule are checked against an independent watcher too."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from vkprovider.devcluster import Cluster
from vkprovider.devcluster.cluster import run_root
from vkprovider.devcluster.datapath import provider_range, why_unavailable
from vkprovider.kube.client import KubeClient
from vkprovider.sim import chart, kueue
from vkprovider.sim.local import fakecloud_module
from vkprovider.sim.runner import RunOptions, RunResult, run
from vkprovider.sim.scenario import load_scenario

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        importlib.util.find_spec("vkprovider_fakecloud.ledger") is None,
        reason="the report's money comes from fakecloud's billing ledger, which this build lacks",
    ),
]

SCENARIO = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "scenarios" / "quick.yaml"
Counts = tuple[tuple[str, int, int], ...]  # (workload, local, external) per workload


def ready_external(pods: list[dict[str, Any]], virtual_node: str) -> list[str]:
    """UIDs of live workload pods on the virtual node that vkprovider marked Ready."""
    return [
        p["metadata"]["uid"]
        for p in pods
        if p["spec"].get("nodeName") == virtual_node
        and not p["metadata"].get("deletionTimestamp")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p["status"].get("conditions") or []
        )
    ]


def count(pods: list[dict[str, Any]], virtual_node: str) -> Counts:
    """Replicas per workload as a user would count them: live pods bound locally / to the virtual node."""
    tally: dict[str, list[int]] = {}
    for pod in pods:
        workload = (pod["metadata"].get("labels") or {}).get("sim.vkprovider.io/workload")
        if workload is None or pod["metadata"].get("deletionTimestamp"):
            continue
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        node = pod["spec"].get("nodeName")
        slot = tally.setdefault(workload, [0, 0])
        if node == virtual_node:
            slot[1] += 1
        elif node:
            slot[0] += 1
    return tuple(sorted((w, n[0], n[1]) for w, n in tally.items()))


Gang = tuple[float, str, int, bool]  # (time, training job, its pods, its Workload admitted or finished)


async def training_seen(kube: KubeClient) -> list[Gang]:
    """Each training Job's pods and whether Kueue had admitted it, read straight from the apiserver."""
    pods = (await kube.request("GET", f"/api/v1/namespaces/{kueue.NAMESPACE}/pods"))["items"]
    workloads = (await kube.request("GET", f"{kueue.API}/namespaces/{kueue.NAMESPACE}/workloads"))["items"]
    jobs = (await kube.request("GET", f"/apis/batch/v1/namespaces/{kueue.NAMESPACE}/jobs"))["items"]
    now = time.time()
    out = []
    for job in jobs:
        name = job["metadata"]["name"]
        owned = [w for w in workloads if kueue.owner_job(w) == name]
        admitted = any(kueue.workload_state(w) != "queued" for w in owned)
        count = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get("job-name") == name)
        out.append((now, name, count, admitted))
    return out


async def watch_apiserver(
    name: str,
    seen: list[tuple[float, Counts]],
    gangs: list[Gang],
    stop: asyncio.Event,
    ready: list[tuple[float, float, list[str]]] | None = None,
) -> None:
    """Sample the apiserver independently of the runner, from the moment the cluster is up."""
    workdir = run_root() / name
    kube: KubeClient | None = None
    try:
        while not stop.is_set():
            if kube is None:
                cluster = Cluster.load(workdir)
                if cluster is not None and cluster.kubeconfig.exists():
                    with contextlib.suppress(Exception):
                        kube = await KubeClient.connect(str(cluster.kubeconfig))
            if kube is not None:
                with contextlib.suppress(Exception):
                    asked = time.time()
                    pods = (await kube.request("GET", "/api/v1/namespaces/default/pods"))["items"]
                    now = time.time()
                    seen.append((now, count(pods, "vk-external")))
                    if ready is not None:
                        ready.append((asked, now, ready_external(pods, "vk-external")))
                with contextlib.suppress(Exception):  # until Kueue's API is installed
                    gangs.extend(await training_seen(kube))
            await asyncio.sleep(0.5)
    finally:
        if kube is not None:
            await kube.close()


def colour_pixels(png: Path, colour: str) -> int:
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    with Image.open(png) as image:
        counts = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(n for n, pixel in counts if pixel == rgb)


async def ledger_entries(clouds: dict[str, str]) -> list[dict[str, Any]]:
    """Every provider's billing ledger, read straight from the fakeclouds."""
    out = []
    async with httpx.AsyncClient(timeout=10.0) as client:
        for url in clouds.values():
            out += (await client.get(f"{url}/admin/ledger")).json()["entries"]
    return out


def ledger_money(entries: list[dict[str, Any]], until: float) -> float:
    total = 0.0
    for e in entries:
        end = until if e["ended_at"] is None else min(e["ended_at"], until)
        total += e["price_per_hour"] * max(0.0, end - e["started_at"]) / 3600.0
    return total


async def deployments_without_a_pod(clouds: dict[str, str], kube: KubeClient) -> list[str]:
    """Provider deployments whose pod UID no pod in the namespace has (an orphan, now)."""
    pods = (await kube.request("GET", "/api/v1/namespaces/default/pods"))["items"]
    uids = {p["metadata"]["uid"] for p in pods}
    found = []
    async with httpx.AsyncClient(timeout=10.0) as client:
        for name, url in clouds.items():
            for d in (await client.get(f"{url}/admin/deployments")).json():
                if d["uid"] not in uids:
                    found.append(f"{name}/{d['provider_id']}")
    return found


@pytest.fixture
async def simulated_day(tmp_path: Path) -> Any:
    scenario = load_scenario(SCENARIO)
    name = f"simtest-{os.getpid()}"
    seen: list[tuple[float, Counts]] = []
    gangs: list[Gang] = []
    ready: list[tuple[float, float, list[str]]] = []
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_apiserver(name, seen, gangs, stop, ready))
    options = RunOptions(cluster_name=name, keep_running=True, live=False, reports=tmp_path)
    result: RunResult | None = None
    try:
        result = await run(scenario, options)
        stop.set()
        await watcher
        yield scenario, result, seen, gangs, ready
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await watcher
        if result is not None:
            await result.stack.down()
        cluster = Cluster.load(run_root() / name)
        if cluster is not None:
            await cluster.stop()
        shutil.rmtree(run_root() / name, ignore_errors=True)


async def test_a_simulated_day_and_its_report(simulated_day: Any) -> None:
    scenario, result, seen, gangs, ready = simulated_day
    folder: Path = result.folder
    summary = json.loads((folder / "report.json").read_text())
    md = (folder / "report.md").read_text()
    entries = await ledger_entries(result.stack.clouds)
    # the data path runs beside the day (kube-proxy, every provider routed), or a note says why not
    net = result.stack.cluster.datapath
    if why_unavailable() is None:
        ranges = {provider_range(i) for i in range(len(scenario.providers))}
        assert net is not None and ranges <= set(net.routes()), result.stack.notes
    else:
        assert any(note.startswith("data path: not started") for note in result.stack.notes)

    # spend: the report's money is the ledgers' money, and something was really spent
    truth = ledger_money(entries, summary["billed_until"])
    assert truth > 0, "the training job should have pushed inference out to a provider"
    assert summary["total"]["ledger_money"] == pytest.approx(truth, rel=0.01)
    assert summary["total"]["money"] == pytest.approx(truth * scenario.scale, rel=0.01)
    ideal = summary["policies"][0]
    print(f"quick.yaml: run ${truth * scenario.scale:,.2f}, ideal ${ideal['money']:,.2f}")

    # the invariants, recomputed from the providers' books and the apiserver, not from the report
    books = fakecloud_module("ledger")  # the providers' own overlap check, over every instance
    overlaps = books.overlaps(books.LedgerEntry(**e) for e in entries)
    assert not overlaps, [o.describe() for o in overlaps]
    kube = await KubeClient.connect(str(result.stack.cluster.kubeconfig))
    try:
        assert await deployments_without_a_pod(result.stack.clouds, kube) == []
    finally:
        await kube.close()
    # ghost-Ready: every external pod the watcher saw Ready had a ledger entry serving then
    serving_after = {p.name: scenario.real(p.startup + p.ready_after) for p in scenario.providers}
    by_uid: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_uid.setdefault(e["uid"], []).append(e)
    ghosts = [  # the pod list is from between `asked` and `u`: an entry must serve in between
        (u, uid)
        for asked, u, uids in ready
        for uid in uids
        if not any(
            e["started_at"] + serving_after[e["provider"]] <= u + 0.1
            and (e["ended_at"] is None or asked < e["ended_at"])
            for e in by_uid.get(uid, [])
        )
    ]
    assert any(uids for _, _, uids in ready), "the watcher never saw a Ready external pod"
    assert not ghosts, f"Ready external pods no ledger entry served: {ghosts[:5]}"
    # traffic: the table is the load generator's own records, every request sent was answered,
    # and the Service was answered locally and, during the burst, by a provider
    if net is not None:
        traffic = result.recording.traffic
        assert traffic is not None and summary["traffic"] is not None, result.recording.notes
        for w, row in zip(scenario.workloads, summary["traffic"], strict=True):
            records = traffic[w.name]
            assert len(records) == int(w.requests_per_second * scenario.clock.real_seconds) == row["requests"]
            assert row["failed"] == sum(1 for r in records if r.latency is None) == 0, row["errors"]
            places = {r.answerer.split("/", 1)[0] for r in records}
            assert "local" in places and places & {p.name for p in scenario.providers}, places
            assert f"| {w.name} | {w.requests_per_second:g} | {row['requests']} | **0** |" in md
        print("quick.yaml traffic:", summary["traffic"])
    assert summary["verdict"] == {"ok": True, "broken": []}, summary["verdict"]
    assert md.splitlines()[2].startswith("**Verdict: every invariant held**")

    # replica counts: wherever the apiserver showed a steady state, the report's samples agree
    samples = result.recording.samples
    compared = 0
    for (_, before), (u, counts), (_, after) in zip(seen, seen[1:], seen[2:], strict=False):
        if not before == counts == after or not samples[0].t <= u <= samples[-1].t:
            continue
        near = [x for x in samples if abs(x.t - u) <= 0.5]
        for x in near:
            recorded = tuple(sorted((w, s.local, s.external) for w, s in x.workloads.items()))
            assert recorded == counts, f"at {u:.1f}: report {recorded} != apiserver {counts}"
            compared += 1
    assert compared >= 10
    assert any(external for _, c in seen for (_, _, external) in c), "the apiserver never showed a burst"

    # the chart is a real PNG that shows the data: local replicas and the cheap provider's area
    png = folder / "timeline.png"
    with Image.open(png) as image:
        image.verify()
    assert colour_pixels(png, chart.LOCAL_COLOUR) > 5000
    assert colour_pixels(png, chart.PROVIDER_COLOURS[0]) > 200, "the cheap provider's area is missing"
    assert "| ideal (lower bound) |" in md and "## Time resolution" in md

    # honest about what ran: without the gate and descheduler nothing comes home, and it says so
    for component in ("gate", "descheduler"):
        running = summary["components"][component]
        assert (f"- {component}: running" in md) == running
        assert (f"- {component}: **not running**" in md) == (not running)
    if summary["components"]["gate"]:
        gate = [
            row.split(",")[-1] for row in (folder / "events.csv").read_text().splitlines() if ",gate," in row
        ]
        opened = next(i for i, g in enumerate(gate) if "bursting allowed" in g)
        assert any("stay home" in g for g in gate[opened:]), f"the gate never closed after training: {gate}"
    if summary["components"]["gate"] and summary["components"]["descheduler"]:
        last = samples[-1]
        assert all(w.external == 0 for w in last.workloads.values()), "inference should be home again"

    # training through real Kueue: admitted whole, one Job after the other, never a pod before
    assert scenario.training.kueue, "quick.yaml submits training through Kueue"
    assert summary["quota_steps"][0][1] == 8, "serve's quota sync sets the queue to the fleet's 8 GPUs"
    admissions = {a["job"]: a for a in summary["admissions"]}
    first, second = admissions["train"], admissions["train-b"]
    assert None not in (first["admitted"], first["finished"], second["admitted"])
    assert second["admitted"] >= first["finished"], "train-b must wait until train has finished"
    assert second["queued_behind"] == ["train"]
    assert all(a["first_pod"] >= a["admitted"] for a in admissions.values())
    assert summary["invariants"]["gang"] == []
    assert "| train-b | 4 |" in md and "train ran |" in md
    # ... and as an independent watcher of the apiserver saw it
    assert gangs, "the watcher never read a training Job"
    assert not [g for g in gangs if g[2] and not g[3]], "a training pod existed before its Job was admitted"
    queued_while_running = {g[0] for g in gangs if g[1] == "train-b" and not g[3]} & {
        g[0] for g in gangs if g[1] == "train" and g[2]
    }
    assert queued_while_running, "train-b was never seen queued while train had pods"
