"""The day's lower bound and its counterfactuals, replayed from the world's own rules (pure).

Every policy here replays the same recorded day (each sample's local nodes, training pods,
desired replicas; the runner's capacity and outage actions) through the rules the simulated
world itself obeys, so none of them can be cheaper than the world allows:

- a replica runs locally while its GPUs fit on one node next to the training pods there (per-node
  fragmentation); a cordoned node keeps what it holds but takes nothing new; a node that is not
  Ready holds nothing;
- an external replica needs one instance with at least its GPUs, billed per instance (an 8-GPU
  offer costs its full price for a 1-GPU replica) from its create, start-up included;
- nothing can be bought from, or deleted at, a provider whose API is in an outage; a capacity
  cut stops new instances but running ones keep running at their price;
- nothing migrates between providers.

**ideal**: the cheapest schedule of the whole day under those rules, found with foresight by
:mod:`vkprovider.sim.bound` (a perfect gate, an instant return, and, where the future pays for
it, an instance kept through a capacity cut or bought before an outage): it serves the most
replica-hours the day allows, and no run serving as many costs less.

Counterfactuals of the same day, replayed greedily (a perfect gate without foresight): **no
bursting** (nothing bought; the replicas that did not fit are unserved), **burst but never
return** (what went out stays out until the replicas are scaled away), **NoExecute return** (the
ideal's money, but every replica the ideal brings home is evicted at once and is not Ready for
the fleet's start-up: the availability dip PDB pacing avoids).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from vkprovider.sim.bound import Bound, lower_bound
from vkprovider.sim.record import Action, NodeSample, Sample
from vkprovider.sim.rules import capacity_at, free_gpus, local_nodes, outages_at
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
        nodes, free = local_nodes(sample), free_gpus(s, sample)
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
    window = _window(samples, start, end)
    bound = lower_bound(s, window, actions)
    ideal = Policy(
        "ideal (lower bound)",
        "the cheapest run of this day with foresight (exact optimum over the recorded samples): only "
        "what fits on no local node goes out, each to an instance of the cheapest feasible offer, "
        "billed per instance from its create (start-up included); nothing bought or deleted in an "
        "outage; running instances survive capacity cuts; per-node fragmentation respected"
        + ("" if bound.exact else " (solver stopped early: its proven bound)"),
        gpu_hours=bound.gpu_hours,
        money=bound.money,
        unserved_replica_hours=bound.unserved_replica_hours,
    )
    never = Policy(
        "burst, never return",
        "greedy, no foresight: what fits on no local node goes to the cheapest provider with room "
        "and stays out (until the workload is scaled down)",
    )
    nothing = Policy(
        "no bursting",
        "nothing bought: replicas that fit on no local node are unserved (replica-hours short)",
    )
    noexec = Policy(
        "NoExecute return",
        "the ideal's instances, but replicas come home by eviction all at once (a NoExecute taint): "
        f"each is down for the fleet's start-up ({s.fleet.ready_after / 60:g} min)",
        gpu_hours=bound.gpu_hours,
        money=bound.money,
        unserved_replica_hours=bound.unserved_replica_hours,
    )
    packing, greedy_fleet, never_fleet = Packing(), Instances(s), Instances(s)
    held: dict[str, int] = {}
    noexec.min_ready = {w.name: w.replicas for w in s.workloads}
    for policy in (ideal, nothing, never, noexec):
        policy.cumulative = [(window[0].t, 0.0)] if window else []
    _ideal_curve(s, bound, ideal, noexec)
    for here, after in itertools.pairwise(window):
        hours = s.sim(after.t - here.t) / 3600.0
        limits, down = capacity_at(s, actions, here.t), outages_at(actions, here.t)
        need = _external_need(s, here, packing.step(s, here, greedy_fleet.running, down))
        greedy_fleet.adjust(need, limits, down)
        held = {n: min(here.workloads[n].desired, max(held.get(n, 0), need[n])) for n in need}
        never_unserved = never_fleet.adjust(held, limits, down)
        rate, gpus = never_fleet.rate()
        never.money += rate * hours
        never.gpu_hours += gpus * hours
        never.unserved_replica_hours += sum(never_unserved.values()) * hours
        nothing.unserved_replica_hours += sum(need.values()) * hours
        for policy in (nothing, never):
            policy.cumulative.append((after.t, policy.money))
    return [ideal, nothing, never, noexec]


def _ideal_curve(s: Scenario, bound: Bound, ideal: Policy, noexec: Policy) -> None:
    """The ideal's spend so far per sample, and NoExecute's dip: each replica the ideal brings
    home (its external count falls by more than a scale-down explains) is evicted, down for the
    fleet's start-up."""
    spent = 0.0
    before = None
    for step in bound.steps:
        rate = sum(
            n * p.price_per_hour for p in s.providers for (_, q), n in step.instances.items() if q == p.name
        )
        spent += rate * s.sim(step.until - step.t) / 3600.0
        for name in noexec.min_ready:
            desired = step.desired.get(name, 0)
            if before is not None:
                scaled_away = max(0, before.desired.get(name, 0) - desired)
                home = max(0, before.external(name) - step.external(name) - scaled_away)
                noexec.min_ready[name] = min(noexec.min_ready[name], desired - home)
                noexec.not_ready_replica_hours += home * s.fleet.ready_after / 3600.0
        before = step
        ideal.cumulative.append((step.until, spent))
        noexec.cumulative.append((step.until, spent))
