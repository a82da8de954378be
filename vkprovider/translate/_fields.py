"""Typed, defensive access to raw pod JSON.

Pods arrive as plain dicts from the API server (or from a test, or from a fuzzer). Every read goes
through these helpers so a wrong type anywhere becomes an ``InvalidRequest`` naming the field,
never a ``KeyError``/``TypeError`` deep inside translation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vkprovider.errors import InvalidRequest


def invalid(path: str, message: str, *, reason: str = "InvalidPodSpec") -> InvalidRequest:
    """The one way translation reports a field it cannot accept."""
    return InvalidRequest(f"{path}: {message}", reason=reason)


def obj(value: Any, path: str) -> Mapping[str, Any]:
    if type(value) is dict:  # decoded JSON: skip the ABC check (called ~30 times per pod)
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise invalid(path, f"expected an object, got {type(value).__name__}")
    return value


def items(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise invalid(path, f"expected a list, got {type(value).__name__}")
    return list(value)


def text(value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise invalid(path, f"expected a string, got {type(value).__name__}")
    return value


def required_text(value: Any, path: str) -> str:
    result = text(value, path)
    if not result:
        raise invalid(path, "required")
    return result


def flag(value: Any, path: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(path, f"expected a boolean, got {type(value).__name__}")
    return value


def integer(value: Any, path: str, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(path, f"expected an integer, got {type(value).__name__}")
    return value


def str_map(value: Any, path: str) -> dict[str, str]:
    """A ``map[string]string`` such as labels, annotations or a nodeSelector."""
    result: dict[str, str] = {}
    for key, val in obj(value, path).items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise invalid(path, "expected a map of strings to strings")
        result[key] = val
    return result
