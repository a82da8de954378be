"""The operator's view behind ``GET /state`` and ``vkprovider status``: per provider its health,
breaker, catalog age and pods; spend per provider and namespace; blocklist entries with their
expiry; the work queue. Read from in-memory state only (no provider or API calls), so it answers
during an outage, which is when it is needed.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController

JSON = dict[str, Any]


def _age(moment: float | None, now: float) -> float | None:
    return None if moment is None else round(max(now - moment, 0.0), 1)


def providers_view(placer: Placer, controller: PodController, now: float) -> dict[str, JSON]:
    health = placer.health.summary()
    pods: dict[str, Counter[str]] = defaultdict(Counter)
    for tracked in controller.tracker.deployments.values():
        pods[tracked.provider][str(tracked.status.phase.value)] += 1
    spend: defaultdict[str, float] = defaultdict(float)
    holdings = placer.budgets.holdings()
    for uid, (provider, _) in placer.placements().items():
        held = holdings.get(uid)
        if held is not None:
            spend[provider] += held[1]
    out: dict[str, JSON] = {}
    for name in sorted(placer.providers):
        catalog = placer.catalog.providers.get(name)
        offers = catalog.offers if catalog is not None else []
        out[name] = {
            **health.get(name, {}),
            "unusable": (placer.health.unusable_reason(name) or ("", ""))[1],
            "catalog_age_seconds": _age(catalog.fetched_at if catalog else None, now),
            "catalog_stale": bool(catalog is None or catalog.stale or catalog.fetched_at is None),
            "catalog_error": catalog.error if catalog is not None else "",
            "offers": len(offers),
            "free_gpus": sum(max(rec.capacity, 0) * rec.count for rec in offers),
            "pods": dict(sorted(pods.get(name, Counter()).items())),
            "spend_per_hour": round(spend[name], 6),
        }
    return out


def spend_view(placer: Placer) -> list[JSON]:
    """Rows of (provider, namespace, pods, money per hour), after discounts; caps per namespace."""
    rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    placements = placer.placements()
    for uid, (namespace, cost) in placer.budgets.holdings().items():
        provider = placements[uid][0] if uid in placements else "?"
        row = rows[(provider, namespace)]
        row[0] += 1
        row[1] += cost
    return [
        {
            "provider": provider,
            "namespace": namespace,
            "pods": int(count),
            "per_hour": round(cost, 6),
            "namespace_cap": placer.budgets.cap(namespace),
        }
        for (provider, namespace), (count, cost) in sorted(rows.items())
    ]


def blocklist_view(placer: Placer, now: float) -> list[JSON]:
    return [
        {
            "provider": e.provider,
            "gpu_type": e.gpu_type,
            "region": e.region,
            "reason": e.reason,
            "expires_in_seconds": round(max(e.expires_at - now, 0.0), 1),
        }
        for e in sorted(placer.blocklist.entries(), key=lambda e: e.expires_at)
    ]


def operator_state(placer: Placer, controller: PodController) -> JSON:
    now = time.monotonic()  # the clock the Placer runs on in the service
    unplaced = sum(
        1
        for pod in controller.informer.cache.values()
        if placer.placed(str(pod["metadata"].get("uid", ""))) is None
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )
    return {
        "breaker_open": placer.health.breaker_open(),
        "providers": providers_view(placer, controller, now),
        "spend": spend_view(placer),
        "blocklist": blocklist_view(placer, now),
        "queue": {"waiting": len(controller.queue), "busy": controller.queue.busy, "unplaced_pods": unplaced},
    }
