from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vkprovider.errors import InvalidRequest
from vkprovider.translate import cpu_cores, memory_bytes, parse_quantity
from vkprovider.translate.quantity import whole_count


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("128974848", Decimal(128974848)),
        ("129M", Decimal(129_000_000)),
        ("123Mi", Decimal(123 * 1024**2)),
        ("1k", Decimal(1000)),
        ("1Ki", Decimal(1024)),
        ("100u", Decimal("0.0001")),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("+2", Decimal(2)),
        ("1E", Decimal(10**18)),
        (2, Decimal(2)),
    ],
)
def test_parse_quantity(raw: object, expected: Decimal) -> None:
    assert parse_quantity(raw) == expected


@pytest.mark.parametrize(
    "raw", ["", "abc", "1.2.3", "1Gb", "1 Gi", "Mi", "1e", "--1", "1e999", None, True, [1]]
)
def test_parse_quantity_rejects_garbage(raw: object) -> None:
    with pytest.raises(InvalidRequest):
        parse_quantity(raw, "spec.containers[0].resources.requests.cpu")


def test_cpu_rounds_up_to_millicores_and_memory_to_bytes() -> None:
    assert cpu_cores("100m") == 0.1
    assert cpu_cores("0.0001") == 0.001
    assert memory_bytes("129m") == 1  # 0.129 bytes, rounded up like Quantity.Value()
    assert memory_bytes("1.5Gi") == 1610612736


def test_negative_resources_and_fractional_gpus_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="negative"):
        cpu_cores("-1")
    with pytest.raises(InvalidRequest, match="whole number"):
        whole_count("1.5", "limits[nvidia.com/gpu]")
    assert whole_count("2", "x") == 2


_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "m": Decimal("0.001"),
}


@given(number=st.integers(min_value=0, max_value=10**12), suffix=st.sampled_from(sorted(_SUFFIXES)))
def test_integer_with_suffix_round_trips(number: int, suffix: str) -> None:
    assert parse_quantity(f"{number}{suffix}") == number * Decimal(_SUFFIXES[suffix])


@given(st.text(max_size=20))
def test_parse_quantity_only_raises_invalid_request(raw: str) -> None:
    try:
        value = parse_quantity(raw)
    except InvalidRequest:
        return
    assert isinstance(value, Decimal)
