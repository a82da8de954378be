"""Run one scenario end to end on the real local control plane and write its report.

1. start the stack (control plane + kwok fleet, fakeclouds, ``vkprovider serve``, gate and
   Descheduler when this build has them) and apply the workloads;
2. warm up: wait until every replica is Ready on the local nodes and answers through its
   Service (the day starts from a steady state, not from the cold start);
3. drive the timeline in compressed real time while a sampler records the world every
   ``runtime.sample_seconds`` and feeds the live view, and a load generator per workload sends
   its ``requests_per_second`` to the workload's Service all day (through kube-proxy);
4. after the day, give deletions ``runtime.settle_seconds`` to finish, count orphaned provider
   deployments, read the ledgers one last time and write the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from vkprovider.devcluster.cluster import run_root
from vkprovider.devcluster.loadgen import LoadReport, run_load, who
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import get
from vkprovider.kube.client import KubeClient
from vkprovider.models import LABEL_POD_UID
from vkprovider.sim import manifests, report
from vkprovider.sim.costs import provider_costs
from vkprovider.sim.ledger import LedgerReader
from vkprovider.sim.live import LiveView
from vkprovider.sim.observe import Observer
from vkprovider.sim.record import Action, Recording, Sample
from vkprovider.sim.scenario import Scenario
from vkprovider.sim.service_config import gate_section, preflight
from vkprovider.sim.stack import Stack
from vkprovider.sim.timeline import Change, sample_changes
from vkprovider.sim.traffic import REQUEST_TIMEOUT_SECONDS
from vkprovider.sim.world import World

log = logging.getLogger(__name__)


def reports_root() -> Path:
    return run_root().parent / "reports"


@dataclass
class RunOptions:
    cluster_name: str = "demo"
    admin_port: int | None = None  #: None: a free port
    reports: Path = field(default_factory=reports_root)
    keep_running: bool = True  #: leave the stack up (``make demo``); False stops it (tests)
    live: bool = True
    warmup_timeout: float = 180.0


@dataclass
class RunResult:
    folder: Path
    recording: Recording
    stack: Stack


class Run:
    def __init__(self, s: Scenario, stack: Stack, kube: KubeClient, view: LiveView) -> None:
        self.s, self.stack, self.kube, self.view = s, stack, kube, view
        self.world = World(s, kube, stack.clouds, real_jobs=stack.pod_delays)
        self.ledgers = LedgerReader(stack.clouds)
        self.observer = Observer(
            s,
            kube,
            self.ledgers,
            virtual_node=stack.virtual_node,
            gate_taint_key=stack.gate_taint_key,
            admin_url=stack.admin_url,
        )
        self.rec = Recording(scenario=s.model_dump(mode="json"), day_start=0.0, day_end=0.0, end=0.0)
        self.rec.components = {"gate": stack.gate, "descheduler": stack.descheduler}
        if stack.kueue:
            self.rec.components |= {"kueue": True, "quota sync": True}
        self.last: Sample | None = None

    async def close(self) -> None:
        await self.world.close()
        await self.ledgers.close()
        await self.observer.close()

    async def warm_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sample = await self.observer.sample()
            home = all(
                w.ready_local == w.desired and w.external == 0 and w.pending == 0
                for w in sample.workloads.values()
            )
            # with a gate, the steady state has its taint on while enough local GPUs are free
            free = sample.local_gpus - sample.local_gpus_used
            expect_taint = self.stack.gate and free >= int(gate_section(self.s)["taint_at_free_gpus"])
            gate_settled = sample.gate_tainted is not None and sample.gate_tainted == expect_taint
            # through Kueue: serve's quota sync has set the queue to what the fleet offers
            quota_synced = not self.s.training.kueue or sample.queue_gpus == self.expected_quota
            if home and gate_settled and quota_synced and await self.services_answer(sample):
                return
            await asyncio.sleep(1.0)
        self.rec.notes.append(
            f"warm-up: not every replica was Ready locally and answering through its Service (and the gate "
            "and the queue's quota settled) "
            f"after {timeout:.0f}s; started anyway"
        )

    async def services_answer(self, sample: Sample) -> bool:
        """Whether each workload's Service, through kube-proxy, reaches every one of its Ready
        replicas (as many distinct answerers as Ready replicas, out of 5 probes per replica): the
        day's traffic starts from a data path that has caught up with the apiserver. True without
        a data path."""
        net = self.stack.cluster.datapath
        if net is None:
            return True
        node = NetnsSockets(net.node)
        try:
            for w in self.s.workloads:
                ip, ready = await self.world.cluster_ip(w.name), sample.workloads[w.name].ready
                seen = set()
                for _ in range(5 * ready):
                    try:
                        async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                            seen.add(who(await get(await node.client(), ip, manifests.SERVICE_PORT)))
                    except (OSError, TimeoutError):
                        return False
                if len(seen) < ready:
                    return False
        finally:
            node.close()
        return True

    @property
    def expected_quota(self) -> int:
        return self.s.fleet.nodes * self.s.fleet.gpus_per_node - self.s.training.reserve_gpus

    def spent(self, now: float) -> float:
        return sum(c.money for c in provider_costs(self.s, self.ledgers.last, now))

    async def sample_loop(self) -> None:
        interval = self.s.runtime.sample_seconds
        while True:
            started = time.monotonic()
            try:
                await self.world.enforce_limits()
                sample = await self.observer.sample()
            except Exception as exc:  # the world is flaky on purpose; keep sampling
                log.warning("sample failed: %s", exc)
                self.view.event(Change(time.time(), "sampler", "error", str(exc)[:120]))
            else:
                self.rec.samples.append(sample)
                if self.last is not None:
                    for change in sample_changes(self.last, sample):
                        self.view.event(change)
                self.last = sample
                self.view.update(sample, self.spent(sample.t))
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def start_traffic(self, tasks: list[asyncio.Task[LoadReport]]) -> None:
        """One load generator per workload, at its ``requests_per_second`` for the whole day, to
        its Service's ClusterIP from the node namespace (through kube-proxy); their records fill
        ``rec.traffic`` as they go, their tasks ``tasks``. Without the data path, none (the report
        says so)."""
        net = self.stack.cluster.datapath
        if net is None:
            return
        self.rec.traffic = {}
        for w in self.s.workloads:
            report = LoadReport()
            self.rec.traffic[w.name] = report.records
            load = run_load(
                net.node,
                await self.world.cluster_ip(w.name),
                manifests.SERVICE_PORT,
                rate=w.requests_per_second,
                duration=self.s.clock.real_seconds,
                timeout=REQUEST_TIMEOUT_SECONDS,
                report=report,
            )
            tasks.append(asyncio.create_task(load, name=f"load-{w.name}"))

    async def finish_traffic(self, tasks: list[asyncio.Task[LoadReport]], *, day_over: bool) -> None:
        """After the day, let the last requests answer or time out (a day cut short stops them at
        once); a generator that failed becomes a note."""
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, timeout=REQUEST_TIMEOUT_SECONDS + 5.0 if day_over else 0)
        for task in pending:
            task.cancel()
            self.rec.notes.append(f"traffic: {task.get_name()} did not finish; cancelled")
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            if task.exception() is not None:
                self.rec.notes.append(f"traffic: {task.get_name()} failed: {task.exception()!r}"[:300])

    async def day(self) -> None:
        self.rec.day_start = time.time()
        self.view.start_day(self.rec.day_start)
        sampler = asyncio.create_task(self.sample_loop())
        load: list[asyncio.Task[LoadReport]] = []
        try:
            await self.start_traffic(load)
            for step in self.world.steps():
                await asyncio.sleep(max(0.0, self.rec.day_start + step.at - time.time()))
                try:
                    action = await step.run()
                except Exception as exc:
                    action = Action(time.time(), "error", step.label, f"{type(exc).__name__}: {exc}"[:300])
                self.rec.actions.append(action)
                self.view.event(Change(action.t, action.kind, action.subject, action.detail))
            await asyncio.sleep(max(0.0, self.rec.day_start + self.s.clock.real_seconds - time.time()))
            self.rec.day_end = time.time()
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await self.finish_traffic(load, day_over=self.rec.day_end > 0)

    async def orphans(self) -> list[str]:
        """Provider deployments of the virtual node whose pod no longer exists."""
        pods = (await self.kube.request("GET", f"/api/v1/namespaces/{self.s.namespace}/pods"))["items"]
        uids = {p["metadata"]["uid"] for p in pods}
        found = []
        async with httpx.AsyncClient(timeout=10.0) as client:
            for name, url in self.stack.clouds.items():
                for d in (await client.get(f"{url}/admin/deployments")).json():
                    uid = d["labels"].get(LABEL_POD_UID, d["uid"])
                    if uid not in uids:
                        found.append(f"{name}/{d['provider_id']} (pod {uid})")
        return sorted(found)

    async def settle(self) -> None:
        deadline = time.monotonic() + self.s.runtime.settle_seconds
        while True:
            self.rec.orphans = await self.orphans()
            if not self.rec.orphans or time.monotonic() >= deadline:
                break
            await asyncio.sleep(2.0)
        try:
            self.rec.ledgers = await self.ledgers.read_all(strict=True)
        except Exception as exc:
            self.rec.ledgers = dict(self.ledgers.last)
            self.rec.ledger_source = f"last good reading ({exc})"
        if self.s.training.kueue:
            with contextlib.suppress(Exception):  # one last reading: a Job that finished meanwhile
                await self.observer.sample()
            self.rec.admissions = list(self.observer.admissions.values())
        self.rec.end = time.time()


def _notes(stack: Stack) -> list[str]:
    notes = list(stack.notes)
    if not stack.gate:
        notes.append("gate: not in this build; the virtual node never carries the local-capacity taint")
    if not stack.descheduler:
        notes.append("descheduler: not available; external replicas stay out until deleted")
    if not stack.pod_delays:
        notes.append(
            "kwok without stage delays: training runs as bare pods (kwok completes Job pods at once), "
            "local replicas are Ready at once"
        )
    return notes


async def run(s: Scenario, options: RunOptions | None = None) -> RunResult:
    opts = options or RunOptions()
    preflight(s)
    view = LiveView(s, enabled=opts.live)
    stack = await Stack.up(s, cluster_name=opts.cluster_name, admin_port=opts.admin_port, say=view.say)
    kube = await KubeClient.connect(str(stack.cluster.kubeconfig), qps=50, burst=100)
    sim = Run(s, stack, kube, view)
    sim.rec.notes = _notes(stack)
    view.gate = stack.gate
    try:
        await sim.world.setup()
        view.say(f"applied {len(s.workloads)} workloads; waiting until every replica is Ready locally ...")
        await sim.warm_up(opts.warmup_timeout)
        view.say(f"the day starts: {s.clock.day / 3600:g}h in {s.clock.real_seconds:g}s")
        with view:
            await sim.day()
        view.say("the day is over; letting deletions settle and reading the ledgers ...")
        await sim.settle()
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        folder = report.write(sim.rec, opts.reports / f"{s.name}-{stamp}")
    finally:
        await sim.close()
        await kube.close()
        if not opts.keep_running:
            await stack.down()
    return RunResult(folder, sim.rec, stack)
