"""Label selectors and tolerations, evaluated locally against informer caches.

The gate watches every node once and filters here, instead of listing per reading; the syntax
is the equality-based subset of ``kubectl -l``: ``k=v``, ``k==v``, ``k!=v``, ``k`` and ``!k``,
comma-separated (all must hold).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_TERM = re.compile(rf"^\s*(?P<neg>!)?\s*(?P<key>{_KEY})\s*(?:(?P<op>==|!=|=)\s*(?P<value>{_VALUE}))?\s*$")

Matcher = Callable[[Mapping[str, str]], bool]


def parse_selector(selector: str) -> Matcher:
    """Compile ``selector``; ``ValueError`` names the term that does not parse."""
    checks: list[tuple[str, str, str]] = []  # (operator, key, value)
    for term in selector.split(","):
        match = _TERM.match(term)
        if match is None or (match["neg"] and match["op"]):
            raise ValueError(f"cannot parse label selector term {term.strip()!r}")
        op = "!" if match["neg"] else (match["op"] or "exists")
        checks.append(("=" if op == "==" else op, match["key"], match["value"] or ""))

    def matches(labels: Mapping[str, str]) -> bool:
        for op, key, value in checks:
            ok = {
                "!": key not in labels,
                "exists": key in labels,
                "!=": labels.get(key) != value,
                "=": labels.get(key) == value,
            }[op]
            if not ok:
                return False
        return True

    return matches


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """The scheduler's rule: some toleration matches the taint's key, value and effect."""
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        operator = tol.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True  # an empty key with Exists tolerates everything
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False
