"""The day's lower bound and its counterfactuals, replayed from the world's own rules (pure).

Every policy here replays the same recorded day (each sample's local nodes, training pods,
desired replicas; the runner's capacity and outage actions) through the rules the simulated
world itself obeys, so none of them can be cheaper than the world allows:

- a replica runs locally while its GPUs fit on one node next to the training pods there (per-node
  fragmentation); a cordoned node keeps what it runs but takes nothing new; a node that is not
  Ready holds nothing;
- an external replica needs one instance with at least its GPUs, billed per instance (an 8-GPU
  offer costs its full price for a 1-GPU replica) from its create, start-up included;
- nothing can be bought from, or deleted at, a provider whose API is in an outage; a capacity
  cut stops new instances but running ones keep running at their price;
- nothing migrates between providers.

**ideal**: a perfect gate and an instant return. Every replica that fits locally runs locally
(replicas no instance serves are placed first, then the dearest instances come home); the rest
go out to the cheapest provider that has room the moment they stop fitting; the dearest
deletable instance ends the moment its replica is home or scaled away. An instance an outage
keeps from being deleted goes on billing and serves its workload's next replica. Ties between
workloads break by name. ``tests/unit/sim/test_sim_ideal.py`` plays random days replica by
replica: a perfect run costs exactly this, and with one workload and steady provider capacity
no run that serves as much costs less. The ideal has no foresight: with several workloads, a
capacity cut or an outage, a run that happened to keep the right instance can come out below it
(the report says so when it does).

Counterfactuals of the same day: **no bursting** (nothing bought; the replicas that did not fit
are unserved), **burst but never return** (what went out stays out until the replicas are
scaled away), **NoExecute return** (the ideal's money, but every replica that may come home is
evicted at once and is not Ready for the fleet's start-up: the availability dip PDB pacing avoids).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from vkprovider.sim.record import Action, NodeSample, Sample
from vkprovider.sim.scenario import ProviderSpec, Scenario


@dataclass
class Policy:
    name: str
    definition: str  #: one line, printed under the report's table
    gpu_hours: float = 0.0  #: external instance GPU-hours, simulated
    money: float = 0.0  #: simulated
    unserved_replica_hours: float = 0.0  #: replicas that fitted nowhere (or were not sent out)
    not_ready_replica_hours: float = 0.0  #: replicas down while they restart (NoExecute return)
    #: NoExecute return: per workload, the fewest Ready replicas its evictions leave
    min_ready: dict[str, int] = field(default_factory=dict)
    cumulative: list[tuple[float, float]] = field(default_factory=list)  #: (t, money so far)


@dataclass
class Instance:
    provider: ProviderSpec
    workload: str  #: the replica it serves (instances never change hands between workloads)


def capacity_at(s: Scenario, actions: list[Action], t: float) -> dict[str, int]:
    """Each provider's instance limit at ``t``: configured, then as capacity events set it."""
    limits = {p.name: p.capacity for p in s.providers}
    for action in sorted(actions, key=lambda a: a.t):
        if action.t > t:
            break
        if action.kind == "capacity" and action.value is not None:
            limits[action.subject] = int(action.value)
    return limits


def outages_at(actions: list[Action], t: float) -> set[str]:
    """Providers whose API is down at ``t``."""
    down: set[str] = set()
    for action in sorted(actions, key=lambda a: a.t):
        if action.t > t:
            break
        if action.kind == "outage-start":
            down.add(action.subject)
        elif action.kind == "outage-end":
            down.discard(action.subject)
    return down


def _nodes(sample: Sample) -> dict[str, NodeSample]:
    """The sample's local nodes; a recording without them gets one node of the schedulable GPUs."""
    if sample.nodes:
        return sample.nodes
    training = sum(t.gpus for t in sample.training.values())
    return {"local": NodeSample(gpus=sample.local_gpus, training_gpus=training)}


def free_gpus(s: Scenario, sample: Sample) -> dict[str, int]:
    """GPUs per local node left to inference once training holds its share. Pending training
    pods (admitted, waiting for preemption) preempt at once: each takes the schedulable node
    with the most room."""
    nodes = _nodes(sample)
    free = {n: (x.gpus - x.training_gpus) if x.ready else 0 for n, x in nodes.items()}
    for _, tr in s.trainings():
        ts = sample.training.get(tr.name)
        per_pod = s.gpus_per_pod(tr)
        for _ in range(ts.pending if ts else 0):
            open_nodes = [n for n, x in nodes.items() if x.ready and not x.cordoned and free[n] >= per_pod]
            if open_nodes:
                best = max(open_nodes, key=lambda n: (free[n], n))
                free[best] -= per_pod
    return {n: max(0, f) for n, f in free.items()}


@dataclass
class Packing:
    """Which replicas of each workload run on which local node (the ideal's own placement)."""

    on: dict[str, dict[str, int]] = field(default_factory=dict)  #: node -> workload -> replicas

    def local(self, workload: str) -> int:
        return sum(w.get(workload, 0) for w in self.on.values())

    def step(self, s: Scenario, sample: Sample, running: list[Instance], down: set[str]) -> dict[str, int]:
        """Repack for this sample; returns replicas per workload that run locally.

        Cordoned nodes keep what they held (less, if training or a scale-down takes it).
        Schedulable nodes are packed afresh, largest replicas first, each onto the fullest node
        it fits: first the replicas no instance serves (so the most replicas are served), then
        replicas coming home from their instances, dearest instance first (one in an outage
        cannot be deleted, so its replica stays out)."""
        nodes, free = _nodes(sample), free_gpus(s, sample)
        desired = {w.name: ws.desired for w in s.workloads if (ws := sample.workloads.get(w.name))}
        sizes = {w.name: w.gpus for w in s.workloads}
        order = sorted(desired, key=lambda n: (-sizes[n], n))
        kept: dict[str, dict[str, int]] = {}
        for node, x in sorted(nodes.items()):
            if not x.cordoned:
                continue
            room, held = free.get(node, 0), {}
            for name in order:
                was = self.on.get(node, {}).get(name, 0)
                left = desired[name] - sum(h.get(name, 0) for h in kept.values())
                keep = min(was, room // sizes[name], left)
                if keep > 0:
                    held[name] = keep
                    room -= keep * sizes[name]
            kept[node] = held
            free[node] = 0
        self.on = kept
        dearest = sorted(running, key=lambda i: (-i.provider.price_per_hour, i.provider.name, i.workload))
        staying: list[Instance] = []
        for name in desired:  # scaled away: the dearest deletable instances go first
            mine = [i for i in dearest if i.workload == name]
            surplus = self.local(name) + len(mine) - desired[name]
            for i in mine:
                if surplus > 0 and i.provider.name not in down:
                    surplus -= 1
                else:
                    staying.append(i)
        for name in order:
            served = sum(1 for i in staying if i.workload == name)
            self._place(name, desired[name] - self.local(name) - served, free, nodes, sizes[name])
        for i in sorted(staying, key=dearest.index):
            if i.provider.name not in down:
                self._place(i.workload, 1, free, nodes, sizes[i.workload])
        return {name: self.local(name) for name in desired}

    def _place(
        self, name: str, count: int, free: dict[str, int], nodes: dict[str, NodeSample], size: int
    ) -> None:
        for _ in range(count):
            fits = [n for n, f in free.items() if f >= size and not nodes[n].cordoned]
            if not fits:
                return
            node = min(fits, key=lambda n: (free[n], n))
            free[node] -= size
            self.on.setdefault(node, {})
            self.on[node][name] = self.on[node].get(name, 0) + 1


class Instances:
    """The instances a policy runs, per workload: the dearest deletable ones end first, then the
    cheapest provider with room is bought from. One a workload could not delete (its provider in
    an outage) keeps billing and serves that workload's next replica out."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.running: list[Instance] = []

    def adjust(self, need: dict[str, int], limits: dict[str, int], down: set[str]) -> dict[str, int]:
        """Run ``need[workload]`` instances; returns the replicas left unserved per workload."""
        for name in sorted(need):
            mine = [i for i in self.running if i.workload == name]
            extra = len(mine) - need[name]
            for i in sorted(mine, key=lambda i: (-i.provider.price_per_hour, i.provider.name)):
                if extra <= 0:
                    break
                if i.provider.name not in down:
                    self.running.remove(i)
                    extra -= 1
        unserved: dict[str, int] = {}
        for name in sorted(need):
            size = self.s.workload(name).gpus
            missing = need[name] - sum(1 for i in self.running if i.workload == name)
            while missing > 0:
                used = {p.name: 0 for p in self.s.providers}
                for i in self.running:
                    used[i.provider.name] += 1
                offers = [
                    p
                    for p in self.s.providers
                    if p.gpus >= size and p.name not in down and used[p.name] < limits.get(p.name, p.capacity)
                ]
                if not offers:
                    unserved[name] = missing
                    break
                cheapest = min(offers, key=lambda p: (p.price_per_hour, p.name))
                self.running.append(Instance(cheapest, name))
                missing -= 1
        return unserved

    def rate(self) -> tuple[float, int]:
        """($/h, GPUs) of what runs now."""
        return sum(i.provider.price_per_hour for i in self.running), sum(
            i.provider.gpus for i in self.running
        )


def _window(samples: list[Sample], start: float, end: float) -> list[Sample]:
    return [x for x in samples if start <= x.t <= end]


def _external_need(s: Scenario, sample: Sample, local: dict[str, int]) -> dict[str, int]:
    return {name: max(0, ws.desired - local.get(name, 0)) for name, ws in sample.workloads.items()}


def policies(
    s: Scenario, samples: list[Sample], actions: list[Action], start: float, end: float
) -> list[Policy]:
    """ideal, no bursting, burst but never return, NoExecute return: over the same samples."""
    ideal = Policy(
        "ideal (lower bound)",
        "perfect gate and instant return: only what fits on no local node goes out, to the cheapest "
        "provider with room and not in an outage, billed per instance from its create (start-up "
        "included), back the moment it fits; running instances survive capacity cuts and outages",
    )
    never = Policy(
        "burst, never return",
        "as the ideal, but a replica that went out stays out (until the workload is scaled down)",
    )
    nothing = Policy(
        "no bursting",
        "nothing bought: replicas that fit on no local node are unserved (replica-hours short)",
    )
    noexec = Policy(
        "NoExecute return",
        "the ideal's instances, but replicas come home by eviction all at once (a NoExecute taint): "
        f"each is down for the fleet's start-up ({s.fleet.ready_after / 60:g} min)",
    )
    window = _window(samples, start, end)
    packing, ideal_fleet, never_fleet = Packing(), Instances(s), Instances(s)
    held: dict[str, int] = {}
    before: Sample | None = None
    before_need: dict[str, int] = {}
    everyone = (ideal, nothing, never, noexec)
    noexec.min_ready = {w.name: w.replicas for w in s.workloads}
    for policy in everyone:
        policy.cumulative = [(window[0].t, 0.0)] if window else []
    for here, after in itertools.pairwise(window):
        hours = s.sim(after.t - here.t) / 3600.0
        limits, down = capacity_at(s, actions, here.t), outages_at(actions, here.t)
        need = _external_need(s, here, packing.step(s, here, ideal_fleet.running, down))
        unserved = ideal_fleet.adjust(need, limits, down)
        held = {n: min(here.workloads[n].desired, max(held.get(n, 0), need[n])) for n in need}
        never_unserved = never_fleet.adjust(held, limits, down)
        for policy, fleet, missing in ((ideal, ideal_fleet, unserved), (never, never_fleet, never_unserved)):
            rate, gpus = fleet.rate()
            policy.money += rate * hours
            policy.gpu_hours += gpus * hours
            policy.unserved_replica_hours += sum(missing.values()) * hours
        nothing.unserved_replica_hours += sum(need.values()) * hours
        noexec.money, noexec.gpu_hours = ideal.money, ideal.gpu_hours
        noexec.unserved_replica_hours = ideal.unserved_replica_hours
        for name, ws in here.workloads.items():
            scaled_away = max(0, before.workloads[name].desired - ws.desired) if before else 0
            home = max(0, before_need.get(name, 0) - need[name] - scaled_away)
            noexec.min_ready[name] = min(noexec.min_ready[name], ws.desired - home)
            noexec.not_ready_replica_hours += home * s.fleet.ready_after / 3600.0
        before, before_need = here, need
        for policy in everyone:
            policy.cumulative.append((after.t, policy.money))
    return list(everyone)
