"""The ideal is a true lower bound: no run that serves as much costs less, and a run that plays
the ideal's own plan costs exactly the ideal, both measured the way the report measures a real
run (from the ledgers the player writes, not from the ideal's bookkeeping).

The player below is a second, replica-count implementation of the world's rules (see
vkprovider/sim/ideal.py): it checks every move a policy makes against them (per-node GPUs,
cordons, outages freezing a provider, capacity at each create, nothing served beyond desired),
writes one ledger entry per instance and records samples the way ``observe.sample_from`` would.
Its policies: the ideal's plan (perfect, with foresight), and random feasible ones (gradual
moves, late returns, the wrong provider, replicas left out).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vkprovider.sim.bound import Step, lower_bound
from vkprovider.sim.costs import provider_costs
from vkprovider.sim.ideal import policies
from vkprovider.sim.record import Action, LedgerEntry, NodeSample, Sample, WorkloadSample
from vkprovider.sim.scenario import Scenario, parse_scenario

T0 = 1_800_000_000.0
EPS = 1e-6


@dataclass
class World:
    """One step of the generated day: the truth the player acts on."""

    nodes: dict[str, NodeSample]
    desired: dict[str, int]
    actions: list[Action] = field(default_factory=list)  #: capacity / outage changes at this step


def scenario(data: st.DrawFn, steps: int, workloads: int) -> Scenario:
    providers = [
        {
            "name": f"p{i}",
            "price_per_hour": data(st.sampled_from([0.5, 1.0, 2.0, 3.5, 8.0, 16.0])),
            "capacity": data(st.integers(0, 4)),
            "gpus": data(st.sampled_from([1, 1, 2, 8])),
        }
        for i in range(data(st.integers(1, 3)))
    ]
    return parse_scenario(
        {
            "name": "prop",
            "clock": {"day": f"{steps}h", "real_seconds": steps},  # one real second = one hour
            "fleet": {"nodes": data(st.integers(1, 3)), "gpus_per_node": data(st.sampled_from([2, 4, 8]))},
            "providers": providers,
            "workloads": [
                {"name": f"w{i}", "replicas": 4, "gpus": data(st.sampled_from([1, 1, 2])), "pdb": None}
                for i in range(workloads)
            ],
        }
    )


@st.composite
def day(data: st.DrawFn) -> tuple[Scenario, list[World]]:
    """A random day: one to three workloads, capacity cuts, outages, cordons, multi-GPU offers;
    some hours repeat the one before (the bound merges runs of equal inputs)."""
    steps = data(st.integers(3, 9))
    s = scenario(data, steps, data(st.integers(1, 3)))
    worlds: list[World] = []
    for i in range(steps + 1):
        if worlds and data(st.integers(0, 2)) == 0:
            worlds.append(World(worlds[-1].nodes, dict(worlds[-1].desired)))
            continue
        nodes = {
            f"local-gpu-{n}": NodeSample(
                gpus=s.fleet.gpus_per_node,
                ready=data(st.booleans()) or data(st.booleans()),
                cordoned=data(st.integers(0, 3)) == 0,
                training_gpus=data(st.integers(0, s.fleet.gpus_per_node)),
            )
            for n in range(s.fleet.nodes)
        }
        desired = {w.name: data(st.integers(0, 5)) for w in s.workloads}
        actions = []
        for p in s.providers:
            if data(st.integers(0, 3)) == 0:
                actions.append(Action(T0 + i, "capacity", p.name, "", float(data(st.integers(0, 4)))))
            if data(st.integers(0, 4)) == 0:
                kind = data(st.sampled_from(["outage-start", "outage-end"]))
                actions.append(Action(T0 + i, kind, p.name, ""))
        worlds.append(World(nodes, desired, actions))
    return s, worlds


@dataclass
class Move:
    """What a policy wants for the next interval."""

    on_node: dict[str, dict[str, int]]  #: node -> workload -> replicas
    instances: dict[tuple[str, str], int]  #: (workload, provider) -> instances


@dataclass
class State:
    """What the player runs now, and the world's provider state as the actions left it."""

    on_node: dict[str, dict[str, int]] = field(default_factory=dict)
    entries: dict[tuple[str, str], list[LedgerEntry]] = field(default_factory=dict)  #: open ones
    limits: dict[str, int] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)

    def count(self, w: str, p: str) -> int:
        return len(self.entries.get((w, p), []))


Policy = Callable[[Scenario, World, State], Move]


def free(world: World) -> dict[str, int]:
    return {n: (x.gpus - x.training_gpus) if x.ready else 0 for n, x in world.nodes.items()}


def play(
    s: Scenario, worlds: list[World], policy: Policy
) -> tuple[list[Sample], list[Action], dict[str, list[LedgerEntry]]]:
    """Play the day: each step the policy moves, the player checks the move against the world's
    rules (a broken rule fails the test), bills it and records a sample."""
    size = {w.name: w.gpus for w in s.workloads}
    gpus = {p.name: p.gpus for p in s.providers}
    price = {p.name: p.price_per_hour for p in s.providers}
    state = State(limits={p.name: p.capacity for p in s.providers})
    ledgers: dict[str, list[LedgerEntry]] = {p.name: [] for p in s.providers}
    samples, actions = [], []
    serial = itertools.count()
    for i, world in enumerate(worlds):
        t = T0 + i
        for a in world.actions:
            actions.append(a)
            if a.kind == "capacity":
                state.limits[a.subject] = int(a.value or 0)
            elif a.kind == "outage-start":
                state.down.add(a.subject)
            else:
                state.down.discard(a.subject)
        if i == len(worlds) - 1:  # no interval follows the last sample: the ledgers end here
            samples.append(
                Sample(t=t, workloads={w: WorkloadSample(desired=n) for w, n in world.desired.items()})
            )
            break
        move = policy(s, world, state)
        room = free(world)
        for node, held in move.on_node.items():
            assert sum(size[w] * n for w, n in held.items()) <= room[node], "more GPUs than the node has free"
            if world.nodes[node].cordoned:
                for w, n in held.items():
                    assert n <= state.on_node.get(node, {}).get(w, 0), "a cordoned node took a replica"
        for p in price:
            keys = {k for k in (*move.instances, *state.entries) if k[1] == p}
            if p in state.down:
                assert all(move.instances.get(k, 0) == state.count(*k) for k in keys), "changed in an outage"
                continue
            if any(move.instances.get(k, 0) > state.count(*k) for k in keys):
                assert sum(move.instances.get(k, 0) for k in keys) <= state.limits[p], (
                    "created above the limit"
                )
            for w, q in keys:
                assert move.instances.get((w, q), 0) == 0 or gpus[p] >= size[w], "instance too small"
                mine = state.entries.setdefault((w, q), [])
                while len(mine) > move.instances.get((w, q), 0):
                    mine.pop().ended_at = t
                while len(mine) < move.instances.get((w, q), 0):
                    entry = LedgerEntry(p, f"u{next(serial)}", "o", gpus[p], price[p], t)
                    ledgers[p].append(entry)
                    mine.append(entry)
        state.on_node = {n: dict(h) for n, h in move.on_node.items()}
        workloads = {}
        for w, want in world.desired.items():
            local = sum(h.get(w, 0) for h in move.on_node.values())
            up = sum(state.count(w, p) for p in price if p not in state.down)
            held = sum(state.count(w, p) for p in price if p in state.down)
            assert local + up <= want, "served more than desired"
            external = up + min(held, want - local - up)
            workloads[w] = WorkloadSample(
                desired=want, local=local, external=external, ready_local=local, ready_external=external
            )
        samples.append(Sample(t=t, workloads=workloads, nodes=world.nodes))
    for es in ledgers.values():
        for e in es:
            if e.ended_at is None:
                e.ended_at = samples[-1].t
    return samples, actions, ledgers


def recorded(worlds: list[World]) -> tuple[list[Sample], list[Action]]:
    """What the ideal reads of a day: nodes, desired replicas and the provider actions."""
    samples = [
        Sample(
            t=T0 + i, workloads={w: WorkloadSample(desired=n) for w, n in x.desired.items()}, nodes=x.nodes
        )
        for i, x in enumerate(worlds)
    ]
    return samples, [a for x in worlds for a in x.actions]


def following(steps: list[Step]) -> Policy:
    """The ideal's own plan, step by step."""
    plan = iter(steps)

    def policy(s: Scenario, world: World, state: State) -> Move:
        step = next(plan)
        return Move(step.on_node, step.instances)

    return policy


def random_policy(draw: st.DrawFn) -> Policy:
    """A feasible policy that moves gradually: it brings some replicas home late (or keeps
    them out), keeps or drops instances at random, buys from any provider with room (the wrong
    one too)."""

    def lazy() -> int:
        """1 now and then: a replica left out (or an instance dropped) this step."""
        return int(draw(st.integers(0, 3)) == 0)

    def policy(s: Scenario, world: World, state: State) -> Move:
        size = {w.name: w.gpus for w in s.workloads}
        room = free(world)
        on_node: dict[str, dict[str, int]] = {}
        for node, x in sorted(world.nodes.items()):
            on_node[node] = {}
            for w in sorted(size):
                left = world.desired[w] - sum(h.get(w, 0) for h in on_node.values())
                most = min(room[node] // size[w], left)
                if x.cordoned:
                    most = min(most, state.on_node.get(node, {}).get(w, 0))
                n = max(0, most - lazy())
                on_node[node][w] = n
                room[node] -= n * size[w]
        instances = {k: len(v) for k, v in state.entries.items()}
        for w in sorted(size):
            left = world.desired[w] - sum(h.get(w, 0) for h in on_node.values())
            for p in sorted(p.name for p in s.providers if p.name not in state.down):
                keep = min(instances.get((w, p), 0), max(0, left))
                keep = max(0, keep - lazy())
                instances[w, p] = keep
                left -= keep
            offers = [p for p in s.providers if p.gpus >= size[w] and p.name not in state.down]
            for p in draw(st.permutations(offers)) if offers else []:
                used = sum(n for (_, q), n in instances.items() if q == p.name)
                buy = min(max(0, left), max(0, state.limits[p.name] - used))
                instances[w, p.name] = instances.get((w, p.name), 0) + buy
                left -= buy
        return Move(on_node, instances)

    return policy


def served_hours(s: Scenario, samples: list[Sample]) -> float:
    """Replica-hours a played run served (local or on an instance)."""
    return sum(
        sum(w.local + w.external for w in here.workloads.values()) * s.sim(after.t - here.t) / 3600
        for here, after in itertools.pairwise(samples)
    )


def money(s: Scenario, ledgers: dict[str, list[LedgerEntry]], until: float) -> float:
    return sum(p.money for p in provider_costs(s, ledgers, until))


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(day())
def test_a_run_that_plays_the_ideal_plan_costs_exactly_the_ideal(
    generated: tuple[Scenario, list[World]],
) -> None:
    s, worlds = generated
    bound = lower_bound(s, *recorded(worlds))
    samples, actions, ledgers = play(s, worlds, following(bound.steps))  # every move checked
    ideal = policies(s, samples, actions, samples[0].t, samples[-1].t)[0]
    assert bound.exact
    assert money(s, ledgers, samples[-1].t) == pytest.approx(ideal.money, abs=EPS)
    most = sum(sum(x.desired.values()) for x in worlds[:-1])
    assert served_hours(s, samples) == pytest.approx(most - ideal.unserved_replica_hours, abs=EPS)


@PROPERTY
@given(day(), st.data())
def test_no_run_that_serves_as_much_is_cheaper_than_the_ideal(
    generated: tuple[Scenario, list[World]], data: st.DataObject
) -> None:
    s, worlds = generated
    samples, actions, ledgers = play(s, worlds, random_policy(data.draw))
    ideal = policies(s, samples, actions, samples[0].t, samples[-1].t)[0]
    most = sum(sum(x.desired.values()) for x in worlds[:-1])
    ideal_served = most - ideal.unserved_replica_hours
    # the ideal serves the most the day allows; a run that serves as much pays at least its money
    assert served_hours(s, samples) <= ideal_served + EPS
    if served_hours(s, samples) >= ideal_served - EPS:
        assert money(s, ledgers, samples[-1].t) >= ideal.money - EPS


def hand_day(
    providers: list[dict[str, object]], steps: list[tuple[dict[str, NodeSample], int]], gpus: int = 1
) -> tuple[Scenario, list[Sample]]:
    """A day of one workload ``chat``: per hour (one real second) its local nodes and desired replicas."""
    s = parse_scenario(
        {
            "name": "hand",
            "clock": {"day": f"{len(steps)}h", "real_seconds": len(steps)},
            "fleet": {"nodes": 2, "gpus_per_node": 8},
            "providers": providers,
            "workloads": [{"name": "chat", "replicas": 4, "gpus": gpus, "pdb": None}],
        }
    )
    samples = [
        Sample(t=T0 + i, workloads={"chat": WorkloadSample(desired=want)}, nodes=nodes)
        for i, (nodes, want) in enumerate(steps)
    ]
    return s, samples


def test_a_cordoned_node_keeps_its_replicas_while_its_training_holds_its_other_gpus() -> None:
    # node a: training on 4 of 8 GPUs, the 4 replicas next to it; then a is cordoned (b is full of
    # training): the replicas stay (a cordon, not a drain), nothing goes out
    a, b = NodeSample(gpus=8, training_gpus=4), NodeSample(gpus=8, training_gpus=8)
    cordoned = NodeSample(gpus=8, training_gpus=4, cordoned=True)
    s, samples = hand_day(
        [{"name": "cheap", "price_per_hour": 2.0, "capacity": 8}],
        [
            ({"a": a, "b": b}, 4),
            ({"a": cordoned, "b": b}, 4),
            ({"a": cordoned, "b": b}, 4),
            ({"a": a, "b": b}, 4),
        ],
    )
    assert policies(s, samples, [], samples[0].t, samples[-1].t)[0].money == 0


def test_replicas_fit_per_node_not_in_the_sum_of_free_gpus() -> None:
    # 2-GPU replicas, 1 GPU free on each node: 2 GPUs free in all, but no replica fits
    tight = NodeSample(gpus=8, training_gpus=7)
    s, samples = hand_day(
        [{"name": "big", "price_per_hour": 5.0, "capacity": 8, "gpus": 2}],
        [({"a": tight, "b": tight}, 1)] * 3,
        gpus=2,
    )
    ideal = policies(s, samples, [], samples[0].t, samples[-1].t)[0]
    assert ideal.money == pytest.approx(2 * 5.0) and ideal.gpu_hours == pytest.approx(2 * 2)


def test_a_multi_gpu_instance_costs_its_full_price_for_a_one_gpu_replica() -> None:
    # the only provider sells 8-GPU instances at $16/h: each 1-GPU replica out costs $16/h, not $2
    full = NodeSample(gpus=8, training_gpus=8)
    s, samples = hand_day(
        [{"name": "eight", "price_per_hour": 16.0, "capacity": 4, "gpus": 8}],
        [({"a": full, "b": full}, 2)] * 3,
    )
    ideal = policies(s, samples, [], samples[0].t, samples[-1].t)[0]
    assert ideal.money == pytest.approx(2 * 2 * 16.0) and ideal.gpu_hours == pytest.approx(2 * 2 * 8)


def test_nothing_is_bought_from_a_provider_in_an_outage_and_a_capacity_cut_spares_running_ones() -> None:
    full = NodeSample(gpus=8, training_gpus=8)
    s, samples = hand_day(
        [
            {"name": "cheap", "price_per_hour": 2.0, "capacity": 8},
            {"name": "dear", "price_per_hour": 5.0, "capacity": 8},
        ],
        [
            ({"a": full, "b": full}, 1),
            ({"a": full, "b": full}, 2),
            ({"a": full, "b": full}, 2),
            ({"a": full, "b": full}, 0),
        ],
    )
    actions = [
        Action(T0 + 0.5, "capacity", "cheap", "", 0.0),  # sold out: the one running keeps its price
        Action(T0 + 0.9, "outage-start", "dear"),  # and the other provider's API is down
    ]
    ideal = policies(s, samples, actions, samples[0].t, samples[-1].t)[0]
    # hours 0-2: one on cheap at $2; the second replica (hours 1-2) can be bought nowhere
    assert ideal.money == pytest.approx(3 * 2.0)
    assert ideal.unserved_replica_hours == pytest.approx(2.0)


FULL, FREE = NodeSample(gpus=8, training_gpus=8), NodeSample(gpus=8)


def test_foresight_keeps_the_cheap_instance_through_a_capacity_cut() -> None:
    # one replica out for hours 0-1 and 4-5; cheap (1 instance) sells out at 1.5h. Without
    # foresight: cheap 2h, then dear 2h = $22. The bound keeps the cheap one out through hours
    # 2-3 (a late return: the replica could come home) and never needs dear: 6h x $1.
    s, samples = hand_day(
        [
            {"name": "cheap", "price_per_hour": 1.0, "capacity": 1},
            {"name": "dear", "price_per_hour": 10.0, "capacity": 8},
        ],
        [
            ({"a": FULL}, 1),
            ({"a": FULL}, 1),
            ({"a": FREE}, 1),
            ({"a": FREE}, 1),
            ({"a": FULL}, 1),
            ({"a": FULL}, 1),
            ({"a": FULL}, 0),
        ],
    )
    actions = [Action(T0 + 1.5, "capacity", "cheap", "", 0.0)]
    ideal = policies(s, samples, actions, samples[0].t, samples[-1].t)[0]
    assert ideal.money == pytest.approx(6 * 1.0) and ideal.unserved_replica_hours == 0


def test_foresight_buys_before_an_outage_it_cannot_buy_through() -> None:
    # the replica must go out at 1h, while cheap's API is down (0.5h-2.5h): without foresight
    # dear for 2h = $20; the bound sends it out to cheap at 0h and deletes it when the API is
    # back and the replica fits again (3h): 3h x $1.
    s, samples = hand_day(
        [
            {"name": "cheap", "price_per_hour": 1.0, "capacity": 8},
            {"name": "dear", "price_per_hour": 10.0, "capacity": 8},
        ],
        [({"a": FREE}, 1), ({"a": FULL}, 1), ({"a": FULL}, 1), ({"a": FREE}, 1), ({"a": FREE}, 1)],
    )
    actions = [Action(T0 + 0.5, "outage-start", "cheap"), Action(T0 + 2.5, "outage-end", "cheap")]
    ideal = policies(s, samples, actions, samples[0].t, samples[-1].t)[0]
    assert ideal.money == pytest.approx(3 * 1.0) and ideal.unserved_replica_hours == 0
