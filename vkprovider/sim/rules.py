"""The simulated world's state at one sample, as the ideal and its counterfactuals read it (pure):
each provider's instance limit and outages from the runner's actions, and each local node's GPUs
left to inference once training holds its share."""

from __future__ import annotations

from vkprovider.sim.record import Action, NodeSample, Sample
from vkprovider.sim.scenario import Scenario


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


def local_nodes(sample: Sample) -> dict[str, NodeSample]:
    """The sample's local nodes; a recording without them gets one node of the schedulable GPUs."""
    if sample.nodes:
        return sample.nodes
    training = sum(t.gpus for t in sample.training.values())
    return {"local": NodeSample(gpus=sample.local_gpus, training_gpus=training)}


def free_gpus(s: Scenario, sample: Sample) -> dict[str, int]:
    """GPUs per local node left to inference once training holds its share. Pending training
    pods (admitted, waiting for preemption) preempt at once: each takes the schedulable node
    with the most room."""
    nodes = local_nodes(sample)
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
