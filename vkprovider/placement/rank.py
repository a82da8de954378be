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
    f.MAX_PRICE,
    f.GPU_COUNT,
    f.GPU_MEMORY,
    f.REGION,
    f.SPOT,
    f.CAPACITY,
    f.BLOCKLISTED,
    f.SPREAD,
    f.BUDGET,
)
_IDX = {code: i for i, code in enumerate(CODES)}
_PROVIDER, _GPU_TYPE, _GPU_COUNT, _GPU_MEMORY = (
    _IDX[f.PROVIDER],
    _IDX[f.GPU_TYPE],
    _IDX[f.GPU_COUNT],
    _IDX[f.GPU_MEMORY],
)
_REGION, _MAX_PRICE, _SPOT, _CAPACITY = _IDX[f.REGION], _IDX[f.MAX_PRICE], _IDX[f.SPOT], _IDX[f.CAPACITY]
_BLOCKLISTED, _SPREAD, _BUDGET = _IDX[f.BLOCKLISTED], _IDX[f.SPREAD], _IDX[f.BUDGET]


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


def _buckets(
    cat: ProviderCatalog, need: Need, rej: list[int], memo: dict[str, bool]
) -> Iterable[list[IndexedOffer]]:
    wanted = need.gpu_types
    if wanted is None:
        return cat.by_gpu.values()
    out = []
    for gpu, bucket in cat.by_gpu.items():
        ok = memo.get(gpu)
        if ok is None:
            ok = memo[gpu] = gpu_matches(gpu, wanted)
        if ok:
            out.append(bucket)
        else:
            rej[_GPU_TYPE] += len(bucket)
    return out


Item = tuple[int, float, int, str, str, IndexedOffer]  # (priority, score, excess, provider, offer id, rec)


def rank_offers(uid: str, inp: RankInputs, *, stale: tuple[str, ...] = (), detail: bool = False) -> Decision:
    """Filter and score every cached offer; keep the best ``max_candidates`` in rank order.

    Within a GPU bucket offers are sorted by price and a provider's score is monotone in price,
    so once an offer scores strictly worse than the K-th best score so far the rest of its bucket
    is skipped (counted as ``unevaluated``), and providers are visited cheapest-bound first so
    whole providers are skipped too. Ties are never pruned, so the top K are exact.
    """
    need, keep = inp.need, inp.max_candidates
    rej = [0] * len(CODES)
    items: list[Item] = []
    feasible = total = unevaluated = 0
    threshold = math.inf  # score beyond which a non-current offer cannot enter the top K
    count, memory, regions, max_price = need.gpu_count, need.gpu_memory_gb, need.regions, need.max_price
    regions_deny = need.regions_deny or None
    spot_ok = need.spot is not Spot.NEVER and not need.spot_forbidden_by_config
    spot_only = need.spot is Spot.ONLY
    blocked = inp.blocked or None
    remaining = inp.budget_remaining + 1e-9
    memo: dict[str, bool] = {}  # GPU type -> matches the request (few distinct types)
    usable: list[tuple[float, str, ProviderCatalog, ProviderTerms]] = []
    worst: list[float] = []
    filter_providers = need.providers is not None or bool(need.providers_deny)
    current, unusable, terms_of = inp.current_provider, inp.unusable, inp.terms
    for name, cat in inp.catalogs.items():
        n = len(cat.offers)
        total += n
        if not n:
            continue
        if filter_providers and f.provider_reason(name, need) is not None:
            rej[_PROVIDER] += n
            continue
        if name == current:
            feasible += _current(name, cat, inp, rej, items)
            continue
        bad = unusable(name)
        if bad is not None:
            rej[_IDX[bad[0]]] += n
            continue
        terms = terms_of(name)
        usable.append((terms.a * cat.offers[0].price + terms.b, name, cat, terms))
    # Cheapest-possible provider first, so the top-K threshold tightens early; once a provider's
    # best possible score is out, so is every provider after it.
    usable.sort(key=lambda u: (u[0], u[1]))
    for i, (bound, name, cat, terms) in enumerate(usable):
        if bound > threshold:
            unevaluated += sum(len(u[2].offers) for u in usable[i:])
            break
        spread_ok = inp.spread_ok(name)
        a, b, pay = terms.a, terms.b, 1.0 - terms.discount
        seen: set[tuple[str, str]] = set()
        for bucket in _buckets(cat, need, rej, memo):
            for rec in bucket:
                price = rec.price
                if max_price is not None and price > max_price:
                    rej[_MAX_PRICE] += len(bucket) - bucket.index(rec)
                    break
                score = a * price + b
                if score > threshold:
                    unevaluated += len(bucket) - bucket.index(rec)
                    break
                if rec.count < count:
                    rej[_GPU_COUNT] += 1
                elif rec.memory < memory:
                    rej[_GPU_MEMORY] += 1
                elif (regions is not None and rec.region not in regions) or (
                    regions_deny is not None and rec.region in regions_deny
                ):
                    rej[_REGION] += 1
                elif (not spot_ok) if rec.spot else spot_only:
                    rej[_SPOT] += 1
                elif rec.capacity <= 0:
                    rej[_CAPACITY] += 1
                elif blocked is not None and rec.block in blocked:
                    rej[_BLOCKLISTED] += 1
                elif not spread_ok:
                    rej[_SPREAD] += 1
                elif price * pay > remaining:
                    rej[_BUDGET] += 1
                else:
                    feasible += 1
                    if rec.group in seen:
                        continue
                    seen.add(rec.group)
                    items.append((2, score, rec.count - count, name, rec.offer_id, rec))
                    # Max-heap (negated) of the K best scores: its top is the entry threshold.
                    if len(worst) < keep:
                        heapq.heappush(worst, -score)
                        if len(worst) == keep:
                            threshold = -worst[0]
                    elif score < threshold:
                        heapq.heapreplace(worst, -score)
                        threshold = -worst[0]
    items.sort()
    candidates = tuple(
        make_candidate(i + 1, t[5].offer, inp.terms(t[3]), count, t[0] < 2)
        for i, t in enumerate(items[:keep])
    )
    counts = {code: rej[i] for i, code in enumerate(CODES) if rej[i]}
    rejections = tuple(reference_rejections(inp)) if detail else ()
    return Decision(uid, candidates, counts, feasible, total, rejections, stale, unevaluated=unevaluated)


def _current(name: str, cat: ProviderCatalog, inp: RankInputs, rej: list[int], items: list[Item]) -> int:
    """The provider the pod already runs on: static filters only, every offer kept, listed first."""
    feasible = 0
    for rec in cat.offers:
        out = _static_reason(rec, inp.need)
        if out is not None:
            rej[_IDX[out[0]]] += 1
            continue
        feasible += 1
        score = inp.terms(name).score(rec.price)
        pri = 0 if rec.offer_id == inp.current_offer else 1
        items.append((pri, score, rec.count - inp.need.gpu_count, name, rec.offer_id, rec))
    return feasible


def _static_reason(rec: IndexedOffer, need: Need) -> tuple[str, str] | None:
    for code, check in f.OFFER_FILTERS:
        reason = check(rec.offer, need)
        if reason is not None:
            return (code, reason)
    return None


def reference_reason(name: str, rec: IndexedOffer, inp: RankInputs) -> tuple[str, str] | None:
    """Why this offer is out, by the reference filter functions, or ``None`` if feasible."""
    need = inp.need
    reason = f.provider_reason(name, need)
    if reason is not None:
        return (f.PROVIDER, reason)
    current = name == inp.current_provider
    if not current:
        bad = inp.unusable(name)
        if bad is not None:
            return bad
    static = _static_reason(rec, need)
    if static is not None or current:
        return static
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
