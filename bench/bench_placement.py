"""Time placement decisions (``Placer.rank``) with 50 providers x 40 offers each.

Run: ``.venv/bin/python bench/bench_placement.py [--decisions N]``. Prints p50/p99/max per
decision for a few request shapes. Target: p99 < 1 ms on the 2-core dev machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import time

from vkprovider.models import Container, DeploymentRequest, DeploymentStatus, Offer, Phase
from vkprovider.placement import PlacementConfig, Placer, PodContext
from vkprovider.placement.config import ProviderPlacementConfig

GPUS = ["H100-SXM-80GB", "H100-PCIE-80GB", "A100-SXM-80GB", "A100-PCIE-40GB", "L40S-48GB", "RTX4090-24GB"]
REGIONS = ["us-east", "us-west", "eu-west", "eu-central", "ap-south"]


class StaticProvider:
    def __init__(self, name: str, offers: list[Offer]) -> None:
        self._name, self._offers = name, offers

    @property
    def name(self) -> str:
        return self._name

    async def offers(self) -> list[Offer]:
        return self._offers

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        return DeploymentStatus(uid=request.uid, phase=Phase.PENDING)


def build(providers: int, offers: int, seed: int = 7) -> Placer:
    rnd = random.Random(seed)
    table = {}
    for p in range(providers):
        name = f"p{p:02d}"
        table[name] = StaticProvider(
            name,
            [
                Offer(
                    provider=name,
                    offer_id=f"{name}-o{i:02d}",
                    gpu_type=rnd.choice(GPUS),
                    gpu_count=rnd.choice([1, 1, 2, 4, 8]),
                    region=rnd.choice(REGIONS),
                    price_per_hour=round(rnd.uniform(0.3, 30.0), 2),
                    capacity=rnd.choice([0, 1, 3, 10]),
                    spot=rnd.random() < 0.3,
                )
                for i in range(offers)
            ],
        )
    config = PlacementConfig(
        providers={n: ProviderPlacementConfig(discount=rnd.choice([0, 0.1, 0.2])) for n in table},
        namespace_budgets={"capped": 1000.0},
        spread_max_share=0.5,
    )
    placer = Placer(table, config)
    asyncio.run(placer.refresh())
    for i, name in enumerate(table):  # some state: a failing provider, blocklist entries, failures
        if i % 10 == 0:
            placer.blocklist.add(name, GPUS[0], REGIONS[0], "bench")
        if i % 7 == 0:
            placer.health.record_call(name, False)
        placer.health.record_call(name, True)
    placer.health.record_probe("p03", False, "bench")
    return placer


def request(uid: str, gpu: str | None, count: int) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="capped",
        name=uid,
        node_name="vk",
        containers=[Container(name="c", image="i")],
        gpu_type=gpu,
        gpu_count=count,
    )


def measure(placer: Placer, req: DeploymentRequest, ctx: PodContext, n: int) -> list[float]:
    for _ in range(50):
        placer.rank(req, ctx)
    samples = []
    gc.collect()
    for _ in range(n):
        t0 = time.perf_counter_ns()
        placer.rank(req, ctx)
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--providers", type=int, default=50)
    parser.add_argument("--offers", type=int, default=40)
    parser.add_argument("--decisions", type=int, default=5000)
    args = parser.parse_args()
    placer = build(args.providers, args.offers)
    cases = {
        "gpu=H100 x1": (request("u1", "H100", 1), PodContext("capped", workload="w1")),
        "any gpu x1": (request("u2", None, 1), PodContext("capped")),
        "A100 x2, annotations": (
            request("u3", "A100", 2),
            PodContext(
                "capped",
                {
                    "vkprovider.io/regions": "us-east,eu-west",
                    "vkprovider.io/max-price": "20",
                    "vkprovider.io/spot": "false",
                },
            ),
        ),
        "any gpu, current provider": (request("u4", None, 1), PodContext("capped", current_provider="p07")),
    }
    total = args.providers * args.offers
    print(
        f"placement decisions: {args.providers} providers x {args.offers} offers = {total} offers, "
        f"{args.decisions} decisions per case (microseconds)"
    )
    print(f"{'case':32} {'p50':>8} {'p99':>8} {'max':>8} {'mean':>8}")
    for label, (req, ctx) in cases.items():
        s = sorted(measure(placer, req, ctx, args.decisions))
        p99 = s[min(len(s) - 1, int(len(s) * 0.99))]
        print(f"{label:32} {s[len(s) // 2]:8.1f} {p99:8.1f} {s[-1]:8.1f} {statistics.fmean(s):8.1f}")


if __name__ == "__main__":
    main()
