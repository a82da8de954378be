"""The split of a flavor's offer between the queues that share it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vkprovider.quota.shares import split, split_offer


def test_whole_gpus_by_largest_remainder_ties_to_the_first_listed() -> None:
    assert split(Decimal(16), [2, 1], "nvidia.com/gpu") == [11, 5]
    assert split(Decimal(24), [2, 1], "nvidia.com/gpu") == [16, 8]
    assert split(Decimal(3), [1, 1], "nvidia.com/gpu") == [2, 1]
    assert split(Decimal(7), [1, 0, 1], "nvidia.com/gpu") == [4, 0, 3]


def test_cpu_in_millicores_and_memory_in_mebibytes() -> None:
    assert split(Decimal(1), [1, 2], "cpu") == [Decimal("0.333"), Decimal("0.667")]
    mi = 1024**2
    shares = split(Decimal(10 * mi + 5), [1, 1, 1], "memory")
    assert shares == [4 * mi + 5, 3 * mi, 3 * mi]  # below one MiB goes to the first queue


def test_split_offer_per_queue_and_resource() -> None:
    got = split_offer({"nvidia.com/gpu": Decimal(24), "cpu": Decimal(96)}, [("training", 3), ("research", 1)])
    assert got == {
        "training": {"nvidia.com/gpu": 18, "cpu": 72},
        "research": {"nvidia.com/gpu": 6, "cpu": 24},
    }


def test_no_positive_weight_is_refused() -> None:
    with pytest.raises(ValueError):
        split(Decimal(8), [0, 0], "nvidia.com/gpu")


@given(
    st.integers(min_value=0, max_value=10_000),
    st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=8).filter(any),
    st.sampled_from(["nvidia.com/gpu", "cpu", "memory"]),
)
def test_shares_add_up_exactly_never_fractional_gpus_and_zero_weight_gets_nothing(
    amount: int, weights: list[int], resource: str
) -> None:
    total = Decimal(amount) * (Decimal("0.001") if resource == "cpu" else 1)
    shares = split(total, weights, resource)
    assert sum(shares) == total
    assert all(s >= 0 for s in shares)
    assert all(s == 0 for s, w in zip(shares, weights, strict=True) if w == 0)
    if resource == "nvidia.com/gpu":
        assert all(s == s.to_integral_value() for s in shares)
        ideal = [total * w / sum(weights) for w in weights]
        assert all(abs(s - i) < 1 for s, i in zip(shares, ideal, strict=True))  # within one GPU of exact
