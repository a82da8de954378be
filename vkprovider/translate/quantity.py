"""Kubernetes resource quantities ("500m", "1.5", "2Gi", "1e3", "129M") parsed exactly.

Uses ``Decimal`` so "0.1" CPU or "1e3" are not rounded by binary floats; conversions round up
like ``resource.Quantity.Value()`` does, so a request is never translated to less than asked.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from vkprovider.errors import InvalidRequest

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?\d+))?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: Exponents beyond this are not a resource anyone can rent; refusing them keeps Decimal fast.
_MAX_EXPONENT = 30


def parse_quantity(value: object, path: str = "quantity") -> Decimal:
    """Parse a quantity (string, or a bare JSON number) into an exact ``Decimal``."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidRequest(f"{path}: expected a quantity string, got {type(value).__name__}")
    raw = str(value).strip() if not isinstance(value, str) else value.strip()
    match = _QUANTITY.match(raw)
    if match is None:
        raise InvalidRequest(f"{path}: invalid quantity {raw[:40]!r}")
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation:  # pragma: no cover - the regex admits only valid numbers
        raise InvalidRequest(f"{path}: invalid quantity {raw[:40]!r}") from None
    if match.group("binary"):
        return number * _BINARY[match.group("binary")]
    if match.group("decimal"):
        return number.scaleb(_DECIMAL[match.group("decimal")])
    if match.group("exponent"):
        exponent = int(match.group("exponent"))
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidRequest(f"{path}: quantity exponent out of range in {raw[:40]!r}")
        return number.scaleb(exponent)
    return number


def cpu_cores(value: object, path: str = "cpu") -> float:
    """CPU cores, rounded up to whole millicores like the API server does."""
    cores = parse_quantity(value, path)
    if cores < 0:
        raise InvalidRequest(f"{path}: must not be negative")
    return math.ceil(cores * 1000) / 1000


def memory_bytes(value: object, path: str = "memory") -> int:
    """Bytes, rounded up to a whole byte."""
    amount = parse_quantity(value, path)
    if amount < 0:
        raise InvalidRequest(f"{path}: must not be negative")
    return math.ceil(amount)


def whole_count(value: object, path: str) -> int:
    """An extended-resource count such as ``nvidia.com/gpu``: a non-negative whole number."""
    amount = parse_quantity(value, path)
    if amount < 0 or amount != amount.to_integral_value():
        raise InvalidRequest(f"{path}: must be a non-negative whole number")
    return int(amount)
