"""``?node=<name>``: which of the process's virtual nodes (``nodes:``) an admin view answers for.

Shared by the admin API's views and its authorization so both read the parameter alike: a
named node the process serves is that node alone; no name means every node (the view lists
them all, so the caller must be allowed on each); a name it does not serve is a 404 naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar
from urllib.parse import parse_qs

from fastapi import HTTPException
from starlette.types import Scope

T = TypeVar("T")


def pick(nodes: Mapping[str, T], name: str | None) -> T | None:
    """The node ``?node=`` names, None without a name; 404 naming it if it is not served here."""
    if name is None:
        return None
    try:
        return nodes[name]
    except KeyError:
        raise HTTPException(
            404, f"node {name!r}: not a node this process serves (it serves: {', '.join(nodes)})"
        ) from None


def answered_for(scope: Scope, names: list[str]) -> list[str]:
    """The nodes a request's answer speaks for: the ``?node=`` one if served, else all of
    ``names`` (an unknown name is answered 404 by the view, after authorization)."""
    named = parse_qs(scope.get("query_string", b"").decode("latin1")).get("node", [])
    if len(named) == 1 and named[0] in names:
        return named
    return list(names)
