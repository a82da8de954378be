"""The ranker: every cached offer -> filtered, scored, ordered candidates.

Fast path (every decision): whole providers are rejected at once (allow/deny, health), GPU
type buckets that do not match are skipped at once, and the surviving offers go through the
remaining filters as plain slot reads and comparisons. Only the best offer per (provider, GPU
type, region) becomes a candidate, because a ``NoCapacity`` blocklists that whole triple anyway
(SkyPilot's "cheapest per cloud/region" candidates); the top ``max_candidates`` are kept.

Reference path (``detail=True``, for explanations and tests): every offer through the filter
functions of :mod:`vkprovider.placement.filters`, one by one, with a human reason each.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from vkprovider.placement import filters as f
from vkprovider.placement.blocklist import BlockKey
from vkprovider.placement.catalog import IndexedOffer, ProviderCatalog
from vkprovider.placement.constraints import Need, Spot, gpu_matches
from vkprovider.placement.score import ProviderTerms, make_candidate
from vkprovider.placement.types import Candidate, Decision, Rejection

CODES: tuple[str, ...] = (
    f.PROVIDER,
    f.DISABLED,
    f.UNHEALTHY,
    f.GPU_TYPE,
    f.GPU_COUNT,
    f.GPU_MEMORY,
    f.REGION,
    f.MAX_PRICE,
    f.SPOT,
    f.CAPACITY,
    f.BLOCKLISTED,
    f.SPREAD,
    f.BUDGET,
)
_IDX = {code: i for i, code in enumerate(CODES)}


@dataclass(slots=True)
class RankInputs:
    """Everything one decision reads, snapshotted by the caller."""

    catalogs: Mapping[str, ProviderCatalog]
    need: Need
    terms: Callable[[str], ProviderTerms]  # memoised by the caller
    unusable: Callable[[str], tuple[str, str] | None]  # health: (code, reason) or None
    blocked: Mapping[BlockKey, object]  # active blocklist entries
    budget_remaining: float  # math.inf without a cap
    spread_ok: Callable[[str], bool]
    current_provider: str | None = None
    current_offer: str | None = None
    max_candidates: int = 20


def _buckets(cat: ProviderCatalog, need: Need, rej: list[int]) -> Iterable[list[IndexedOffer]]:
    if need.gpu_types is None:
        return cat.by_gpu.values()
    out = []
    for gpu, bucket in cat.by_gpu.items():
        if gpu_matches(gpu, need.gpu_types):
            out.append(bucket)
        else:
            rej[3] += len(bucket)
    return out


def rank_offers(uid: str, inp: RankInputs, *, stale: tuple[str, ...] = (), detail: bool = False) -> Decision:
    need = inp.need
    rej = [0] * len(CODES)
    items: list[tuple[int, float, int, str, str, IndexedOffer]] = []
    feasible = total = 0
    count, memory, regions, max_price = need.gpu_count, need.gpu_memory_gb, need.regions, need.max_price
    regions_deny = need.regions_deny or None
    spot_ok = need.spot is not Spot.NEVER and not need.spot_forbidden_by_config
    spot_only = need.spot is Spot.ONLY
    blocked = inp.blocked or None
    remaining = inp.budget_remaining
    capped = not math.isinf(remaining)
    for name, cat in inp.catalogs.items():
        n = len(cat.offers)
        total += n
        if not n:
            continue
        if f.provider_reason(name, need) is not None:
            rej[0] += n
            continue
        current = name == inp.current_provider
        if not current:
            bad = inp.unusable(name)
            if bad is not None:
                rej[_IDX[bad[0]]] += n
                continue
        spread_ok = current or inp.spread_ok(name)
        terms = inp.terms(name) if capped else None
        seen: set[tuple[str, str]] = set()
        for bucket in _buckets(cat, need, rej):
            for rec in bucket:
                if rec.count < count:
                    rej[4] += 1
                elif rec.memory < memory:
                    rej[5] += 1
                elif (regions is not None and rec.region not in regions) or (
                    regions_deny is not None and rec.region in regions_deny
                ):
                    rej[6] += 1
                elif max_price is not None and rec.price > max_price:
                    rej[7] += 1
                elif (not spot_ok) if rec.spot else spot_only:
                    rej[8] += 1
                elif not current and rec.capacity <= 0:
                    rej[9] += 1
                elif not current and blocked is not None and rec.block in blocked:
                    rej[10] += 1
                elif not spread_ok:
                    rej[11] += 1
                elif (
                    not current
                    and terms is not None
                    and rec.price * (1.0 - terms.discount) > remaining + 1e-9
                ):
                    rej[12] += 1
                else:
                    feasible += 1
                    key = (rec.gpu, rec.region)
                    if current:
                        pri = 0 if rec.offer_id == inp.current_offer else 1
                    elif key in seen:
                        continue
                    else:
                        seen.add(key)
                        pri = 2
                    if terms is None:
                        terms = inp.terms(name)
                    score = terms.a * rec.price + terms.b
                    items.append((pri, score, rec.count - count, name, rec.offer_id, rec))
    # (pri, score, excess, provider, offer id) is unique, so the record itself is never compared.
    top = heapq.nsmallest(inp.max_candidates, items)
    candidates = tuple(
        make_candidate(i + 1, t[5].offer, inp.terms(t[3]), count, t[0] < 2) for i, t in enumerate(top)
    )
    counts = {code: rej[i] for i, code in enumerate(CODES) if rej[i]}
    rejections: tuple[Rejection, ...] = ()
    if detail:
        rejections = tuple(reference_rejections(inp))
    return Decision(uid, candidates, counts, feasible, total, rejections, stale)


def reference_reason(name: str, rec: IndexedOffer, inp: RankInputs) -> tuple[str, str] | None:
    """Why this offer is out, by the reference filter functions, or ``None`` if feasible."""
    need, offer = inp.need, rec.offer
    reason = f.provider_reason(name, need)
    if reason is not None:
        return (f.PROVIDER, reason)
    current = name == inp.current_provider
    if not current:
        bad = inp.unusable(name)
        if bad is not None:
            return bad
    for code, check in f.OFFER_FILTERS:
        reason = check(offer, need)
        if reason is not None:
            return (code, reason)
    if current:
        return None
    checks = (
        (f.CAPACITY, f.capacity_reason(rec.capacity)),
        (f.BLOCKLISTED, f.blocklist_reason(rec.block in inp.blocked)),
        (f.SPREAD, f.spread_reason(inp.spread_ok(name), need.spread_max_share or 1.0)),
    )
    for code, reason in checks:
        if reason is not None:
            return (code, reason)
    if not math.isinf(inp.budget_remaining):
        cost = rec.price * (1.0 - inp.terms(name).discount)
        reason = f.budget_reason(cost, inp.budget_remaining)
        if reason is not None:
            return (f.BUDGET, reason)
    return None


def reference_rejections(inp: RankInputs) -> Iterable[Rejection]:
    for name in sorted(inp.catalogs):
        for rec in inp.catalogs[name].offers:
            out = reference_reason(name, rec, inp)
            if out is not None:
                yield Rejection(name, rec.offer_id, rec.offer.gpu_type, rec.region, rec.price, out[0], out[1])


def reference_feasible(inp: RankInputs) -> list[Candidate]:
    """Every feasible offer scored, in rank order, without the per-triple reduction (tests)."""
    rows = []
    for name in sorted(inp.catalogs):
        for rec in inp.catalogs[name].offers:
            if reference_reason(name, rec, inp) is None:
                current = name == inp.current_provider
                rows.append(make_candidate(0, rec.offer, inp.terms(name), inp.need.gpu_count, current))
    rows.sort(key=lambda c: (not c.current, c.score, c.excess_gpus, c.provider, c.offer.offer_id))
    return rows
