"""Money: what the providers billed (from their ledgers), and the policies of
:mod:`vkprovider.sim.ideal` (the lower bound and the counterfactuals) over the same day.

All pure. Ledger times are real seconds; the simulated day runs ``scale`` times faster, so a
real second billed at ``price_per_hour`` costs ``scale`` simulated seconds of that price. Money
and GPU-hours in the report are *simulated-day* figures (ledger money x scale); the raw ledger
sum is kept as well so it can be checked against the ledgers directly.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from vkprovider.sim.ideal import Policy, policies
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
class Costs:
    providers: list[ProviderCost] = field(default_factory=list)
    policies: list[Policy] = field(default_factory=list)  #: ideal first, then the counterfactuals

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
    return Costs(provider_costs(s, ledgers, until), policies(s, samples, actions, start, end))


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
