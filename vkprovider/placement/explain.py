"""Explanations of a decision: pod annotation (JSON), one-line Event message, CLI table.

The annotation is bounded (top candidates only, short strings, at most ``ANNOTATION_MAX_BYTES``)
so a pod object never grows unboundedly; the table is for humans and may be long.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vkprovider.placement.types import Candidate, Decision, Rejection

ANNOTATION_KEY = "vkprovider.io/placement"
ANNOTATION_MAX_BYTES = 4096
TOP = 5

CODE_TEXT = {
    "provider": "provider not allowed",
    "disabled": "provider disabled (quota/billing)",
    "unhealthy": "provider unreachable",
    "gpu-type": "GPU type",
    "max-price": "over max price",
    "gpu-count": "too few GPUs",
    "gpu-memory": "too little GPU memory",
    "region": "region",
    "spot": "spot policy",
    "capacity": "no capacity",
    "blocklisted": "blocklisted after NoCapacity",
    "spread": "workload spread cap",
    "budget": "namespace budget",
}


def _money(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _row(c: Candidate) -> dict[str, Any]:
    o = c.offer
    return {
        "rank": c.rank,
        "provider": _short(o.provider),
        "offer": _short(o.offer_id),
        "gpu": f"{_short(o.gpu_type, 32)}x{o.gpu_count}",
        "region": _short(o.region, 32),
        "spot": o.spot,
        "price": round(c.list_price, 6),
        "effective": round(c.score, 6),
    }


def annotation_value(decision: Decision) -> str:
    """Compact JSON for the ``vkprovider.io/placement`` annotation (always <= 4 KiB)."""
    best = decision.best
    doc: dict[str, Any] = {
        "chosen": _row(best) if best is not None else None,
        "candidates": [_row(c) for c in decision.candidates[:TOP]],
        "feasible": decision.feasible,
        "offers": decision.total_offers,
        "rejected": dict(sorted(decision.rejected_counts.items())),
    }
    if decision.attempts:
        doc["attempts"] = [[_short(a.provider), _short(a.offer_id), a.outcome] for a in decision.attempts[:8]]
    if decision.stale:
        doc["stale"] = [_short(s) for s in decision.stale[:8]]
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False)
    while len(text.encode()) > ANNOTATION_MAX_BYTES and doc["candidates"]:
        doc["candidates"].pop()
        text = json.dumps(doc, separators=(",", ":"))
    return text


def event_message(decision: Decision) -> str:
    """One line for the ``Placed`` Event (or why nothing could be placed)."""
    best = decision.best
    filtered = sum(decision.rejected_counts.values())
    if best is None:
        return f"no provider can take the pod: {filtered} of {decision.total_offers} offers filtered out"
    o = best.offer
    failed = sum(1 for a in decision.attempts if a.outcome != "ok")
    tail = f"; after {failed} failed attempt(s)" if failed else ""
    kept = " (kept: already running there)" if best.current else ""
    verb = "placed on" if decision.chosen is not None else "best candidate"
    return (
        f"{verb} {o.provider}/{o.offer_id}{kept}: {o.gpu_type}x{o.gpu_count} {o.region or '-'}"
        f"{' spot' if o.spot else ''} at {_money(best.list_price)}/h list, {_money(best.score)}/h effective; "
        f"{len(decision.candidates)} candidate(s), {filtered} offer(s) filtered out{tail}"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def render_table(decision: Decision, *, max_rejections: int = 50) -> str:
    """The human view: ranked candidates (``*`` marks the choice), then what was filtered out."""
    best = decision.best
    rows = []
    for c in decision.candidates:
        o = c.offer
        mark = "*" if best is not None and c.offer.key == best.offer.key else " "
        rows.append(
            [
                f"{mark}{c.rank}",
                o.provider,
                o.offer_id,
                f"{o.gpu_type}x{o.gpu_count}",
                o.region or "-",
                "spot" if o.spot else "on-demand",
                _money(c.list_price),
                _money(c.discounted_price),
                _money(c.failure_penalty),
                _money(c.startup_penalty),
                _money(c.weight),
                _money(c.score),
                "current" if c.current else "",
            ]
        )
    header = ["RANK", "PROVIDER", "OFFER", "GPU", "REGION", "KIND", "LIST/H", "DISC/H"]
    header += ["FAIL/H", "START/H", "WEIGHT", "EFFECTIVE/H", "NOTE"]
    lines = [f"decision for pod {decision.uid}: {decision.total_offers} offers, {decision.feasible} feasible"]
    lines.append(event_message(decision))
    lines.append("")
    lines += _table(header, rows) if rows else ["(no candidates)"]
    hidden = decision.feasible - len(decision.candidates)
    if hidden > 0:
        lines.append(
            f"({hidden} more feasible offers not listed: a cheaper one of the same provider/GPU/region is, or beyond the top rows)"
        )
    if decision.unevaluated:
        lines.append(f"({decision.unevaluated} more offers priced out of the top {len(decision.candidates)})")
    if decision.stale:
        lines.append(f"stale catalogs (last refresh failed): {', '.join(decision.stale)}")
    if decision.attempts:
        lines.append("")
        lines.append(
            "attempts: " + "; ".join(f"{a.provider}/{a.offer_id} {a.outcome}" for a in decision.attempts)
        )
    if decision.rejected_counts:
        lines.append("")
        lines.append(f"filtered out ({sum(decision.rejected_counts.values())} offers):")
        for code, n in sorted(decision.rejected_counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {n:5d}  {CODE_TEXT.get(code, code)}")
    if decision.rejections:
        lines.append("")
        lines += _rejection_lines(decision.rejections, max_rejections)
    return "\n".join(lines)


def _rejection_lines(rejections: Sequence[Rejection], limit: int) -> list[str]:
    rows = [
        [r.provider, r.offer_id, r.gpu_type, r.region or "-", _money(r.price), r.reason] for r in rejections
    ]
    out = _table(["PROVIDER", "OFFER", "GPU", "REGION", "LIST/H", "WHY FILTERED"], rows[:limit])
    if len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more")
    return out


def decision_dict(decision: Decision) -> dict[str, Any]:
    """The full decision as JSON-able data (admin API)."""
    return {
        "uid": decision.uid,
        "chosen": _row(decision.best) if decision.best is not None else None,
        "candidates": [
            _row(c) | {"current": c.current, "penalties": round(c.penalties, 6)} for c in decision.candidates
        ],
        "feasible": decision.feasible,
        "offers": decision.total_offers,
        "unevaluated": decision.unevaluated,
        "rejected": dict(sorted(decision.rejected_counts.items())),
        "rejections": [
            {"provider": r.provider, "offer": r.offer_id, "code": r.code, "reason": r.reason}
            for r in decision.rejections
        ],
        "stale": list(decision.stale),
        "attempts": [
            {"provider": a.provider, "offer": a.offer_id, "outcome": a.outcome} for a in decision.attempts
        ],
    }


def no_candidates_message(decision: Decision, namespace: str, cap: float | None) -> str:
    """Why ``deploy`` found no candidate at all (the ``NotPlaced`` message)."""
    counts = ", ".join(f"{code}: {n}" for code, n in sorted(decision.rejected_counts.items()))
    if decision.rejected_counts.get("budget"):
        return f"namespace {namespace} budget {cap:g}/h would be exceeded ({counts})"
    if not decision.total_offers:
        return "no offers cached from any provider"
    return f"no offer fits ({decision.total_offers} offers; rejected {counts})"
