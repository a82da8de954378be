"""Money: what the providers billed (from their ledgers) and two baselines from the same run.

All pure. Ledger times are real seconds; the simulated day runs ``scale`` times faster, so a
real second billed at ``price_per_hour`` costs ``scale`` simulated seconds of that price. Money
and GPU-hours in the report are *simulated-day* figures (ledger money x scale); the raw ledger
sum is kept as well so it can be checked against the ledgers directly.

Baselines, integrated over the samples of the day:

- **all external**: every inference GPU the workloads asked for (desired replicas x GPUs), on the
  providers all day, cheapest first within each provider's capacity at that time;
- **external only when full**: only the GPUs that did not fit next to training on the local
  nodes that were really schedulable (``desired - (local - training)``), priced the same way.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from vkprovider.sim.record import Action, LedgerEntry, Sample
from vkprovider.sim.scenario import Scenario


@dataclass
class ProviderCost:
    provider: str
    deployments: int = 0
    gpu_hours: float = 0.0  #: simulated
    money: float = 0.0  #: simulated day
    ledger_money: float = 0.0  #: the ledger's own sum over the real run


@dataclass
class Baseline:
    name: str
    gpu_hours: float = 0.0
    money: float = 0.0
    overflow_gpu_hours: float = 0.0  #: demand beyond every provider's capacity (priced at the dearest)


@dataclass
class Costs:
    providers: list[ProviderCost] = field(default_factory=list)
    baselines: list[Baseline] = field(default_factory=list)

    @property
    def total(self) -> ProviderCost:
        total = ProviderCost("total")
        for p in self.providers:
            total.deployments += p.deployments
            total.gpu_hours += p.gpu_hours
            total.money += p.money
            total.ledger_money += p.ledger_money
        return total


def provider_costs(s: Scenario, ledgers: dict[str, list[LedgerEntry]], until: float) -> list[ProviderCost]:
    out = []
    for p in s.providers:
        cost = ProviderCost(p.name)
        for entry in ledgers.get(p.name, []):
            seconds = entry.seconds(until)
            cost.deployments += 1
            cost.gpu_hours += entry.gpus * seconds * s.scale / 3600.0
            cost.ledger_money += entry.price_per_hour * seconds / 3600.0
        cost.money = cost.ledger_money * s.scale
        out.append(cost)
    return out


def capacity_at(s: Scenario, actions: list[Action], t: float) -> dict[str, int]:
    """Each provider's instance limit at ``t``: configured, then as capacity events set it."""
    limits = {p.name: p.capacity for p in s.providers}
    for action in sorted(actions, key=lambda a: a.t):
        if action.t > t:
            break
        if action.kind == "capacity" and action.value is not None:
            limits[action.subject] = int(action.value)
    return limits


def fill_rate(s: Scenario, gpus: float, limits: dict[str, int]) -> tuple[float, float]:
    """($/h, overflow GPUs) to run ``gpus`` on the providers, cheapest per GPU first."""
    offers = sorted(s.providers, key=lambda p: (p.price_per_hour / p.gpus, p.name))
    rate, left = 0.0, float(gpus)
    for p in offers:
        take = min(left, limits.get(p.name, p.capacity) * p.gpus)
        rate += take * p.price_per_hour / p.gpus
        left -= take
    if left > 0:
        dearest = max(p.price_per_hour / p.gpus for p in s.providers)
        rate += left * dearest
    return rate, max(0.0, left)


def demand(s: Scenario, sample: Sample) -> tuple[int, int]:
    """(inference GPUs wanted, GPUs held or claimed by training pods) at a sample."""
    inference = sum(w.desired * s.workload(name).gpus for name, w in sample.workloads.items())
    training = 0
    for _, t in s.trainings():
        ts = sample.training.get(t.name)
        if ts is not None:
            training += ts.gpus + ts.pending * s.gpus_per_pod(t)
    return inference, training


def baselines(
    s: Scenario, samples: list[Sample], actions: list[Action], start: float, end: float
) -> list[Baseline]:
    everything = Baseline("everything external all day")
    when_full = Baseline("external only while local GPUs were really full")
    window = [x for x in samples if start <= x.t <= end]
    for here, after in itertools.pairwise(window):
        hours = (after.t - here.t) * s.scale / 3600.0
        limits = capacity_at(s, actions, here.t)
        inference, training = demand(s, here)
        need_full = max(0, inference - max(0, here.local_gpus - training))
        for base, need in ((everything, inference), (when_full, need_full)):
            rate, overflow = fill_rate(s, need, limits)
            base.gpu_hours += need * hours
            base.money += rate * hours
            base.overflow_gpu_hours += overflow * hours
    return [everything, when_full]


def costs(
    s: Scenario,
    ledgers: dict[str, list[LedgerEntry]],
    samples: list[Sample],
    actions: list[Action],
    *,
    start: float,
    end: float,
    until: float,
) -> Costs:
    return Costs(provider_costs(s, ledgers, until), baselines(s, samples, actions, start, end))


def service_money(s: Scenario, samples: list[Sample], start: float, end: float) -> float | None:
    """Simulated money by vkprovider's own account: its spend rate integrated over the samples."""
    window = [x for x in samples if start <= x.t <= end]
    if not window or all(x.service_spend_rate is None for x in window):
        return None
    return sum(
        (here.service_spend_rate or 0.0) * (after.t - here.t) * s.scale / 3600.0
        for here, after in itertools.pairwise(window)
    )


def ledger_money_between(
    s: Scenario, ledgers: dict[str, list[LedgerEntry]], start: float, end: float
) -> float:
    """Simulated money the ledgers billed inside ``[start, end]`` (to compare with the service's view)."""
    total = 0.0
    for entry in (e for es in ledgers.values() for e in es):
        begin = max(entry.started_at, start)
        stop = min(end, entry.ended_at if entry.ended_at is not None else end)
        total += entry.price_per_hour * max(0.0, stop - begin) / 3600.0
    return total * s.scale


def spend_rate(ledgers: dict[str, list[LedgerEntry]], t: float) -> float:
    """$/h billed at ``t`` (prices are per simulated hour as well)."""
    return sum(e.price_per_hour for es in ledgers.values() for e in es if e.open_at(t))
