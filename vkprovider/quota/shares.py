"""Split a flavor's offer between the ClusterQueues that share it, by weight.

Each resource is split in its own whole units (GPUs and other extended resources: 1; cpu: 1m;
memory and storage: 1Mi), by the largest-remainder method, so the shares always add up to the
offer exactly (what is below one unit goes to the first queue with a non-zero weight), no queue
gets a fraction of a GPU, and the same inputs always give the same split (ties go to the queue
listed first). A weight of 0 gets nothing: such a queue only borrows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import ROUND_FLOOR, Decimal

_MI = Decimal(1024**2)


def unit(resource: str) -> Decimal:
    if resource == "memory" or resource.endswith("storage"):
        return _MI
    if resource == "cpu":
        return Decimal("0.001")
    return Decimal(1)


def split(amount: Decimal, weights: Sequence[int], resource: str) -> list[Decimal]:
    """``amount`` of ``resource`` divided in proportion to ``weights`` (at least one non-zero)."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("at least one weight must be positive")
    step = unit(resource)
    units = (amount / step).to_integral_value(rounding=ROUND_FLOOR)
    exact = [units * w / total for w in weights]
    whole = [x.to_integral_value(rounding=ROUND_FLOOR) for x in exact]
    left = int(units - sum(whole))
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - whole[i]), i))
    for i in by_remainder[:left]:
        whole[i] += 1
    shares = [w * step for w in whole]
    first = next(i for i, w in enumerate(weights) if w > 0)
    shares[first] += amount - units * step  # below one unit: kept, so the sum is exact
    return shares


def split_offer(
    offer: Mapping[str, Decimal], queues: Sequence[tuple[str, int]]
) -> dict[str, dict[str, Decimal]]:
    """queue -> resource -> its share of ``offer``."""
    weights = [w for _, w in queues]
    out: dict[str, dict[str, Decimal]] = {name: {} for name, _ in queues}
    for resource, amount in offer.items():
        for (name, _), share in zip(queues, split(amount, weights, resource), strict=True):
            out[name][resource] = share
    return out
