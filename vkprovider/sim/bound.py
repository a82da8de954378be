"""The day's lower bound: the cheapest run the world's rules allow, found with foresight (pure).

A greedy replay (buy the cheapest offer with room when a replica stops fitting, delete the
dearest instance when it fits again) is optimal only while the future cannot pay: with several
workloads, a capacity cut or an outage, a run that keeps the right instance through the cut
(or buys before the outage) spends less. So the bound is an optimisation over the whole
recording, a mixed-integer program solved exactly by HiGHS (``highspy``), over the same rules
the simulated world obeys, at the recording's sample resolution:

- per interval (between two samples) and local node, how many replicas of each workload run
  there: their GPUs fit next to the training pods on that node (per-node fragmentation; pending
  training preempts first, as :func:`vkprovider.sim.rules.free_gpus` says); a cordoned node
  keeps at most what it ran before and takes nothing new; a node that is not Ready holds nothing;
- per interval, workload and provider, how many instances run: one instance (``gpus`` of the
  offer >= the replica's) serves one replica and bills its full price per hour for as long as
  it exists, from its create (start-up included), so every increase is billed from that moment;
- a provider in an outage can neither create nor delete: its counts stay as they were (an
  instance whose replica went away keeps billing, and may serve that workload again);
- a create is allowed only while the provider's instances, after it, stay within its limit at
  that time (a capacity cut stops new instances; running ones keep running at their price);
- the replicas served (local + external) never exceed the desired replicas: nothing is held
  external beyond what the workload asks for (late returns and idle holding are allowed
  within that, and the program uses them when the future makes them pay).

Two stages, lexicographic: first the most replica-hours served, then the least money for that
service. So every run that serves at least as many replica-hours (a real run, at the sample
resolution) costs at least this much; ``tests/unit/sim/test_sim_ideal.py`` plays random days
replica by replica with random feasible policies (gradual moves, wrong provider, late return)
and with this bound's own plan, measured from the ledgers the player writes.

Consecutive intervals whose inputs are equal are merged into two (all but the last, and the
last): an optimal plan never needs more (any state of the run can be held from its start, and
the last lets it prepare the next change), which keeps the program small on one-second samples.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import highspy

from vkprovider.sim.record import Action, Sample
from vkprovider.sim.rules import capacity_at, free_gpus, local_nodes, outages_at
from vkprovider.sim.scenario import Scenario

#: served replica-hours the money stage may give up against the first stage's optimum (rounding)
SERVED_SLACK = 1e-6
#: relative money the fewest-moves stage may add to the cheapest plan's (rounding)
MONEY_SLACK = 1e-9


@dataclass(frozen=True)
class Inputs:
    """What the world gave for one interval: the program's data (equal inputs merge)."""

    free: tuple[tuple[str, int, bool], ...]  #: (node, GPUs free to inference, cordoned)
    desired: tuple[tuple[str, int], ...]  #: (workload, desired replicas)
    limits: tuple[tuple[str, int], ...]  #: (provider, instance limit)
    down: frozenset[str]  #: providers in an outage


@dataclass
class Step:
    """One interval of the plan (samples ``t`` to ``until``)."""

    t: float
    until: float
    on_node: dict[str, dict[str, int]] = field(default_factory=dict)  #: node -> workload -> replicas
    instances: dict[tuple[str, str], int] = field(default_factory=dict)  #: (workload, provider) -> count
    desired: dict[str, int] = field(default_factory=dict)
    unserved: dict[str, int] = field(default_factory=dict)

    def local(self, workload: str) -> int:
        return sum(on.get(workload, 0) for on in self.on_node.values())

    def external(self, workload: str) -> int:
        return sum(n for (w, _), n in self.instances.items() if w == workload)


@dataclass
class Bound:
    steps: list[Step] = field(default_factory=list)  #: per interval of the recording
    money: float = 0.0  #: simulated
    gpu_hours: float = 0.0  #: external instance GPU-hours, simulated
    unserved_replica_hours: float = 0.0
    #: False when HiGHS stopped before proving optimality: ``money`` is then its proven dual bound
    #: (still a lower bound) and the plan a feasible schedule above it
    exact: bool = True


def inputs(s: Scenario, sample: Sample, actions: list[Action]) -> Inputs:
    nodes = local_nodes(sample)
    free = free_gpus(s, sample)
    desired = {w.name: ws.desired if (ws := sample.workloads.get(w.name)) else 0 for w in s.workloads}
    return Inputs(
        free=tuple((n, free.get(n, 0), x.cordoned) for n, x in sorted(nodes.items())),
        desired=tuple(sorted(desired.items())),
        limits=tuple(sorted(capacity_at(s, actions, sample.t).items())),
        down=frozenset(outages_at(actions, sample.t)),
    )


@dataclass
class _Interval:
    first: int  #: index of the first recorded interval it stands for
    last: int  #: index after the last
    hours: float  #: simulated
    data: Inputs


def _merged(s: Scenario, samples: list[Sample], actions: list[Action]) -> list[_Interval]:
    """Runs of equal inputs become two intervals: all but the last, and the last."""
    raw = [
        (i, s.sim(after.t - here.t) / 3600.0, inputs(s, here, actions))
        for i, (here, after) in enumerate(itertools.pairwise(samples))
    ]
    out: list[_Interval] = []
    for data, group in itertools.groupby(raw, key=lambda r: r[2]):
        run = list(group)
        if len(run) > 1:
            head = run[:-1]
            out.append(_Interval(head[0][0], head[-1][0] + 1, sum(h for _, h, _ in head), data))
        out.append(_Interval(run[-1][0], run[-1][0] + 1, run[-1][1], data))
    return out


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """HiGHS prints its banner on stdout (file descriptor 1, from C++) when a process creates its
    first solver; `make demo`'s stdout is reserved for the shell line it ends with."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _solver() -> highspy.Highs:
    with _quiet_stdout():
        h = highspy.Highs()  # type: ignore[no-untyped-call]  # its __init__ has no annotations
    h.silent()
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-9)
    h.setOptionValue("time_limit", 120.0)
    # HiGHS 1.16.0's MIP presolve returned a point that breaks a constraint (status "Solve
    # error", objective 7 where the optimum is 5) on a 29-variable day of this program; without
    # presolve that day solves right, and the property tests play every plan they get.
    h.setOptionValue("presolve", "off")
    return h


def lower_bound(s: Scenario, samples: list[Sample], actions: list[Action]) -> Bound:
    """The least money any run of these samples that serves as much can cost (see the module)."""
    intervals = _merged(s, samples, actions)
    if not intervals:
        return Bound()
    size = {w.name: w.gpus for w in s.workloads}
    price = {p.name: p.price_per_hour for p in s.providers}
    gpus = {p.name: p.gpus for p in s.providers}
    most = {w: max(dict(iv.data.desired).get(w, 0) for iv in intervals) for w in size}
    ever = {
        p.name: max(
            [
                p.capacity,
                *(int(a.value or 0) for a in actions if a.kind == "capacity" and a.subject == p.name),
            ]
        )
        for p in s.providers
    }
    pairs = [(w, p) for w in size for p in price if gpus[p] >= size[w] and min(most[w], ever[p]) > 0]
    h = _solver()
    integer = highspy.HighsVarType.kInteger

    y: list[dict[tuple[str, str], highspy.highs_var]] = []  #: (node, workload) -> replicas there
    z: list[dict[tuple[str, str], highspy.highs_var]] = []  #: (workload, provider) -> instances
    served_hours: list[highspy.highs_linear_expression] = []
    cost: list[highspy.highs_linear_expression] = []
    for k, iv in enumerate(intervals):
        desired, limits = dict(iv.data.desired), dict(iv.data.limits)
        here_y: dict[tuple[str, str], highspy.highs_var] = {}
        for node, free, cordoned in iv.data.free:
            for w in size:
                cap = free // size[w]
                if cap <= 0 or (cordoned and k > 0 and (node, w) not in y[k - 1]) or (cordoned and k == 0):
                    continue
                var = h.addVariable(lb=0, ub=cap, type=integer)
                here_y[node, w] = var
                if cordoned:  # keeps at most what it ran, takes nothing new
                    h.addConstr(var - y[k - 1][node, w] <= 0)
            placed = [(size[w], v) for (n, w), v in here_y.items() if n == node]
            if len(placed) > 1:
                h.addConstr(h.qsum(g * v for g, v in placed) <= free)
        here_z: dict[tuple[str, str], highspy.highs_var] = {}
        for w, p in pairs:
            ub = min(most[w], ever[p])
            before = z[k - 1].get((w, p)) if k else None
            if p in iv.data.down:  # neither create nor delete
                if before is not None:
                    here_z[w, p] = before
                continue
            here_z[w, p] = h.addVariable(lb=0, ub=ub, type=integer)
        for p in price:
            if p in iv.data.down:
                continue
            mine = [(w, v) for (w, q), v in here_z.items() if q == p]
            total_ub = sum(min(most[w], ever[p]) for w, _ in mine)
            if not mine or limits[p] >= total_ub:
                continue
            creates = h.addVariable(lb=0, ub=1, type=integer)  # 1: some instance is created here
            for w, v in mine:
                before = z[k - 1].get((w, p)) if k else None
                grow = v if before is None else v - before
                h.addConstr(grow - min(most[w], ever[p]) * creates <= 0)
            h.addConstr(h.qsum(v for _, v in mine) + (total_ub - limits[p]) * creates <= total_ub)
        for w in size:
            serving = [v for (_, ww), v in here_y.items() if ww == w]
            for (ww, p), v in here_z.items():
                if ww != w:
                    continue
                if p in iv.data.down:  # held through the outage: serves only if a replica wants it
                    use = h.addVariable(lb=0, ub=min(most[w], ever[p]), type=integer)
                    h.addConstr(use - v <= 0)
                    serving.append(use)
                else:
                    serving.append(v)
            if serving:
                total = h.qsum(serving)
                h.addConstr(total <= desired.get(w, 0))
                served_hours.append(iv.hours * total)
        cost.extend(iv.hours * price[p] * v for (_, p), v in here_z.items())
        y.append(here_y)
        z.append(here_z)

    served = h.qsum(served_hours) if served_hours else None
    exact = True
    if served is not None:
        h.maximize(served)
        exact = _optimal(h)
        best = h.getInfo().objective_function_value
        h.addConstr(served >= best - SERVED_SLACK)
    money_expr = h.qsum(cost) if cost else None
    if money_expr is not None:
        h.minimize(money_expr)
        exact = _optimal(h) and exact
    values = list(h.getSolution().col_value)
    if money_expr is not None and exact:
        values = _fewest_moves(h, y, z, money_expr, values)
    return _read(s, samples, intervals, h, y, z, exact, values)


def _fewest_moves(
    h: highspy.Highs,
    y: list[dict[tuple[str, str], highspy.highs_var]],
    z: list[dict[tuple[str, str], highspy.highs_var]],
    money: highspy.highs_linear_expression,
    values: list[float],
) -> list[float]:
    """Among the cheapest plans, one that moves the fewest replicas and instances: equal money
    leaves the solver free to swap an instance between workloads or a node's replicas between
    workloads every interval, which reads as churn and as returns home that are not (the
    NoExecute counterfactual counts those). A third stage; the money stays the optimum's."""
    best = h.getInfo().objective_function_value
    h.addConstr(money <= best + MONEY_SLACK * max(1.0, abs(best)))
    moves = []
    for series in (y, z):
        for before, here in itertools.pairwise(series):
            for key in before.keys() | here.keys():
                a, b = before.get(key), here.get(key)
                if a is b:
                    continue
                d = h.addVariable(lb=0)
                moves.append(d)
                if a is None:
                    h.addConstr(d - b >= 0)
                elif b is None:
                    h.addConstr(d - a >= 0)
                else:
                    h.addConstr(d - b + a >= 0)
                    h.addConstr(d - a + b >= 0)
    if not moves:
        return values
    h.setOptionValue("time_limit", 30.0)
    h.minimize(h.qsum(moves))
    if h.getInfo().primal_solution_status != 2:  # nothing better found in time: keep the cheapest
        return values
    return list(h.getSolution().col_value)


def _optimal(h: highspy.Highs) -> bool:
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        return True
    if h.getInfo().primal_solution_status != 2:  # no feasible point: cannot happen (all zero is one)
        raise RuntimeError(f"the lower bound's program failed: {h.modelStatusToString(status)}")
    return False


def _read(
    s: Scenario,
    samples: list[Sample],
    intervals: list[_Interval],
    h: highspy.Highs,
    y: list[dict[tuple[str, str], highspy.highs_var]],
    z: list[dict[tuple[str, str], highspy.highs_var]],
    exact: bool,
    values: list[float],
) -> Bound:
    """The plan per recorded interval, and its totals (from the plan, so they add up exactly)."""
    out = Bound(exact=exact)
    price = {p.name: p.price_per_hour for p in s.providers}
    gpus = {p.name: p.gpus for p in s.providers}
    for iv, here_y, here_z in zip(intervals, y, z, strict=True):
        on_node: dict[str, dict[str, int]] = {}
        for (node, w), v in here_y.items():
            if (n := round(values[v.index])) > 0:
                on_node.setdefault(node, {})[w] = n
        instances = {key: n for key, v in here_z.items() if (n := round(values[v.index])) > 0}
        desired = dict(iv.data.desired)
        for i in range(iv.first, iv.last):
            step = Step(samples[i].t, samples[i + 1].t, on_node, instances, desired)
            down = iv.data.down
            for w, want in desired.items():
                out_w = sum(n for (ww, p), n in instances.items() if ww == w and p not in down)
                held = sum(n for (ww, p), n in instances.items() if ww == w and p in down)
                step.unserved[w] = max(0, want - step.local(w) - out_w - held)
            hours = s.sim(step.until - step.t) / 3600.0
            out.money += hours * sum(price[p] * n for (_, p), n in instances.items())
            out.gpu_hours += hours * sum(gpus[p] * n for (_, p), n in instances.items())
            out.unserved_replica_hours += hours * sum(step.unserved.values())
            out.steps.append(step)
    if not exact:
        out.money = min(out.money, h.getInfo().mip_dual_bound)
    return out
