"""Where each config value came from, so an error names the file field or the variable.

The file is read as YAML; ``VKPROVIDER_*`` variables are read by pydantic-settings' own env
source (same parsing as before: ``__`` between levels, JSON for lists and mappings) and merged
over it. Validation then runs once over the merged data, and each error is reported against its
origin: ``node.name: …`` for the file, ``VKPROVIDER_NODE__NAME (node.name): …`` for the
environment — an operator must not hunt through a file for a value it does not contain.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from vkprovider.preflight import FieldProblem

Path_ = tuple[str, ...]


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` wins; mappings merge key by key (as pydantic-settings merges its sources)."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def env_paths(values: Mapping[str, Any], prefix: str, delimiter: str) -> dict[Path_, str]:
    """Field path -> variable name, for every value the environment supplied."""
    by_lower = {name.lower(): name for name in os.environ}
    out: dict[Path_, str] = {}

    def walk(node: Mapping[str, Any], path: Path_) -> None:
        for key, value in node.items():
            here = (*path, str(key))
            wanted = (prefix + delimiter.join(here)).lower()
            if wanted in by_lower:
                out[here] = by_lower[wanted]
            elif isinstance(value, Mapping):
                walk(value, here)

    walk(values, ())
    return out


def variable_for(loc: Path_, env: Mapping[Path_, str]) -> str | None:
    """The variable that supplied ``loc`` or one of its parents (a JSON-valued variable)."""
    for n in range(len(loc), 0, -1):
        found = env.get(loc[:n])
        if found is not None:
            return found
    return None


def problems(exc: ValidationError) -> list[tuple[Path_, str]]:
    """``(field path, message)`` per error; a :class:`FieldProblem` expands to its sub-paths."""
    out: list[tuple[Path_, str]] = []
    for err in exc.errors():
        loc = tuple(str(part) for part in err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblem):
            for sub, message in cause.problems:
                out.append(((*loc, *(p for p in sub.split(".") if p)), message))
            continue
        message = err["msg"].removeprefix("Value error, ")
        out.append((loc, message))
    return out


def report(found: list[tuple[Path_, str]], env: Mapping[Path_, str]) -> list[str]:
    """One line per problem, naming the variable when the value came from the environment."""
    lines = []
    for loc, message in found:
        field = ".".join(loc) or "(root)"
        variable = variable_for(loc, env)
        lines.append(f"{variable} ({field}): {message}" if variable else f"{field}: {message}")
    return lines


def header(source: str | None, env: Mapping[Path_, str]) -> str:
    if source and env:
        return f"invalid configuration in {source} and the environment:"
    if env:
        return "invalid configuration in the environment:"
    return f"invalid configuration in {source or 'the defaults'}:"
