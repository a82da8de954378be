"""One round's reading of the cluster, and each queue's plan from it: pure functions.

Per flavor: its nodes and their states, what the healthy ones offer (minus the reserve), each
queue's share of that, and what every ClusterQueue with quota in the flavor uses (configured or
not: their pods take the same nodes). A node matched by two flavors' selectors counts in the
first one listed only (``counted in flavor <name>`` in the second), so it is never offered twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vkprovider.quota.capacity import NodeState, in_pool, node_state, offered
from vkprovider.quota.config import Target
from vkprovider.quota.plan import (
    FlavorQuota,
    QueuePlan,
    Shortfall,
    has_flavor,
    hold_action,
    in_use,
    nominal_in,
)
from vkprovider.quota.shares import split_offer

JSON = dict[str, Any]


@dataclass(frozen=True)
class FlavorReading:
    target: Target
    nodes: list[NodeState]
    offer: dict[str, Decimal]
    shares: dict[str, dict[str, Decimal]]  #: queue -> resource -> its share of the offer
    used: dict[str, dict[str, Decimal]]  #: ClusterQueue (every one with the flavor) -> resource -> use
    #: ClusterQueues with a nominal quota in the flavor that the config does not list: their
    #: quota comes on top of the offer (over-commit), so the sync warns about them
    unmanaged: list[str]

    @property
    def name(self) -> str:
        return self.target.flavor.name

    def total_used(self, resource: str) -> Decimal:
        return sum((u.get(resource, Decimal(0)) for u in self.used.values()), Decimal(0))


def read_flavors(
    targets: Iterable[Target], nodes: Iterable[JSON], queues: Mapping[str, JSON], maintenance: list[str]
) -> list[FlavorReading]:
    node_list = list(nodes)
    claimed: dict[str, str] = {}  #: node -> the flavor it counts in
    readings = []
    for target in targets:
        flavor = target.flavor
        tolerations = [t.model_dump() for t in flavor.tolerations]
        states = []
        for node in node_list:
            if not in_pool(node, flavor.node_selector):
                continue
            state = node_state(node, flavor.resources, maintenance, tolerations)
            if state.name in claimed:
                state = NodeState(state.name, f"counted in flavor {claimed[state.name]}", state.allocatable)
            elif state.healthy:
                claimed[state.name] = flavor.name
            states.append(state)
        offer = offered(states, flavor.resources, target.reserve())
        shares = split_offer(offer, [(q.name, q.share) for q in flavor.queues])
        listed = {q.name for q in flavor.queues}
        used = {name: in_use(cq, flavor.name) for name, cq in queues.items() if has_flavor(cq, flavor.name)}
        unmanaged = sorted(
            n for n in used if n not in listed and any(nominal_in(queues[n], flavor.name).values())
        )
        readings.append(FlavorReading(target, states, offer, shares, used, unmanaged))
    return readings


def plan_queue(
    name: str,
    cq: JSON,
    readings: Iterable[FlavorReading],
    where: Mapping[str, FlavorQuota],
    *,
    hold: bool,
) -> QueuePlan:
    """The queue's nominal per (flavor, resource) and what to do with its stopPolicy.

    ``where`` maps each of the queue's flavors to its located fields (see ``plan.locate``)."""
    result = QueuePlan(queue=name)
    for reading in readings:
        if name not in reading.shares:
            continue
        located = where[reading.name]
        used = reading.used.get(name, {})
        for resource, share in reading.shares[name].items():
            key = (reading.name, resource)
            result.target[key] = share
            old = located.current.get(resource, Decimal(0))
            if old != share:
                result.changes[key] = (old, share)
            flavor_used = reading.total_used(resource)
            queue_used = used.get(resource, Decimal(0))
            if flavor_used > reading.offer[resource] and queue_used > share:
                result.shortfalls.append(
                    Shortfall(reading.name, resource, flavor_used, reading.offer[resource], queue_used, share)
                )
    result.hold = hold_action(cq, hold and bool(result.shortfalls))
    return result
