"""One round's reading and each queue's plan: the cohort cases of issue 23 as pure functions.

The cohort: ``training`` (share 2) and ``research`` (share 1) split flavor ``local-gpu``, three
nodes x 8 GPUs. ``training`` runs a 24-GPU gang, 8 of them borrowed from idle ``research``.
"""

from __future__ import annotations

from typing import Any

from vkprovider.quota.config import QuotaConfig
from vkprovider.quota.plan import HOLD_ANNOTATION, locate
from vkprovider.quota.reading import FlavorReading, plan_queue, read_flavors

GPU = "nvidia.com/gpu"
JSON = dict[str, Any]


def node(name: str, gpus: int = 8, *, labels: dict[str, str] | None = None, **spec: Any) -> JSON:
    return {
        "metadata": {"name": name, "labels": labels or {"pool": "local-gpu"}},
        "spec": spec,
        "status": {"allocatable": {GPU: str(gpus)}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def queue(name: str, flavors: dict[str, int], used: dict[str, int] | None = None, **spec: Any) -> JSON:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "cohortName": "gpus",
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": f, "resources": [{"name": GPU, "nominalQuota": q}]}
                        for f, q in flavors.items()
                    ],
                }
            ],
            **spec,
        },
        "status": {
            "flavorsUsage": [
                {"name": f, "resources": [{"name": GPU, "total": str(u), "borrowed": "0"}]}
                for f, u in (used or {}).items()
            ]
        },
    }


COHORT = QuotaConfig.model_validate(
    {
        "flavors": [
            {
                "name": "local-gpu",
                "node_selector": {"pool": "local-gpu"},
                "resources": [GPU],
                "queues": [{"name": "training", "share": 2}, {"name": "research", "share": 1}],
            }
        ]
    }
)


def plans(
    config: QuotaConfig, nodes: list[JSON], queues: dict[str, JSON]
) -> tuple[list[FlavorReading], dict[str, Any]]:
    readings = read_flavors(config.targets(), nodes, queues, config.maintenance_taints)
    out = {}
    for name in config.queue_names():
        where = {
            t.flavor.name: locate(queues[name], name, t.flavor.name, t.flavor.resources)
            for t in config.targets()
            if name in {q.name for q in t.flavor.queues}
        }
        out[name] = plan_queue(name, queues[name], readings, where, hold=config.hold)
    return readings, out


def test_borrowing_within_what_the_nodes_offer_is_not_held() -> None:
    queues = {
        "training": queue("training", {"local-gpu": 16}, {"local-gpu": 24}),
        "research": queue("research", {"local-gpu": 8}),
    }
    _, got = plans(COHORT, [node("g0"), node("g1"), node("g2")], queues)
    assert got["training"].changes == {} and got["training"].hold is None
    assert got["research"].changes == {} and got["research"].hold is None


def test_a_borrowing_queue_that_loses_a_node_is_lowered_and_held_the_lender_is_not() -> None:
    queues = {
        "training": queue("training", {"local-gpu": 16}, {"local-gpu": 24}),
        "research": queue("research", {"local-gpu": 8}),
    }
    readings, got = plans(COHORT, [node("g0"), node("g1"), node("g2", unschedulable=True)], queues)
    (reading,) = readings
    assert reading.offer == {GPU: 16} and reading.total_used(GPU) == 24
    training, research = got["training"], got["research"]
    assert training.changes == {("local-gpu", GPU): (16, 11)}  # lowered, never raised to the 24 it uses
    assert research.changes == {("local-gpu", GPU): (8, 5)}
    assert training.hold == "hold"
    (why,) = training.shortfalls
    assert why.describe() == (
        "flavor local-gpu nvidia.com/gpu: admitted workloads use 24 (this queue 24, its share 11), "
        "the healthy nodes offer 16"
    )
    assert research.hold is None  # under its share: Kueue's own cohort accounting stops it


def test_the_hold_is_lifted_once_usage_fits_and_only_if_it_is_the_syncs() -> None:
    held = queue("training", {"local-gpu": 11}, {"local-gpu": 16}, stopPolicy="Hold")
    held["metadata"]["annotations"] = {HOLD_ANNOTATION: "x"}
    nodes = [node("g0"), node("g1"), node("g2", unschedulable=True)]
    _, got = plans(COHORT, nodes, {"training": held, "research": queue("research", {"local-gpu": 5})})
    assert got["training"].hold == "release" and got["training"].changes == {}
    operators = queue("training", {"local-gpu": 11}, {"local-gpu": 16}, stopPolicy="Hold")
    _, got = plans(COHORT, nodes, {"training": operators, "research": queue("research", {"local-gpu": 5})})
    assert got["training"].hold is None


def test_hold_false_never_holds() -> None:
    config = COHORT.model_copy(update={"hold": False})
    queues = {
        "training": queue("training", {"local-gpu": 16}, {"local-gpu": 24}),
        "research": queue("research", {"local-gpu": 8}),
    }
    _, got = plans(config, [node("g0"), node("g1")], queues)
    assert got["training"].hold is None and got["training"].shortfalls


def test_a_queue_outside_the_config_counts_toward_usage_and_is_named() -> None:
    queues = {
        "training": queue("training", {"local-gpu": 16}, {"local-gpu": 8}),
        "research": queue("research", {"local-gpu": 8}),
        "stray": queue("stray", {"local-gpu": 4}, {"local-gpu": 12}),
        "elsewhere": queue("elsewhere", {"cpu-only": 4}, {"cpu-only": 4}),
    }
    readings, got = plans(COHORT, [node("g0"), node("g1")], queues)  # 16 offered, 20 used
    assert readings[0].unmanaged == ["stray"]
    assert readings[0].total_used(GPU) == 20
    assert got["training"].hold is None  # 8 of its share of 11: not over its share
    assert got["research"].hold is None


def two_flavors() -> QuotaConfig:
    return QuotaConfig.model_validate(
        {
            "flavors": [
                {
                    "name": "a100",
                    "node_selector": {"gpu": "a100"},
                    "resources": [GPU],
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "queues": [{"name": "training"}],
                },
                {
                    "name": "h100",
                    "node_selector": {"gpu": "h100"},
                    "resources": [GPU],
                    "queues": [{"name": "training"}],
                },
            ]
        }
    )


def test_several_flavors_per_gpu_type_each_with_its_own_nodes_and_tolerations() -> None:
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    nodes = [
        node("a0", labels={"gpu": "a100"}, taints=gpu_taint),
        node("a1", labels={"gpu": "a100"}, taints=gpu_taint),
        node("h0", 4, labels={"gpu": "h100"}, taints=gpu_taint),  # h100 workloads do not tolerate it
        node("h1", 4, labels={"gpu": "h100"}),
    ]
    queues = {"training": queue("training", {"a100": 0, "h100": 0})}
    readings, got = plans(two_flavors(), nodes, queues)
    assert [r.offer[GPU] for r in readings] == [16, 4]
    assert {n.name: n.state for n in readings[1].nodes}[
        "h0"
    ] == "untolerated taint nvidia.com/gpu=present:NoSchedule"
    assert got["training"].changes == {("a100", GPU): (0, 16), ("h100", GPU): (0, 4)}


def test_a_node_two_selectors_match_counts_in_the_first_flavor_only() -> None:
    nodes = [node("both", labels={"gpu": "a100"})]
    config = QuotaConfig.model_validate(
        {
            "flavors": [
                {
                    "name": "a100",
                    "node_selector": {"gpu": "a100"},
                    "resources": [GPU],
                    "queues": [{"name": "training"}],
                },
                {
                    "name": "any",
                    "node_selector": {"gpu": "a100"},
                    "resources": [GPU],
                    "queues": [{"name": "training"}],
                },
            ]
        }
    )
    readings, _ = plans(config, nodes, {"training": queue("training", {"a100": 0, "any": 0})})
    assert [r.offer[GPU] for r in readings] == [8, 0]
    assert readings[1].nodes[0].state == "counted in flavor a100"
