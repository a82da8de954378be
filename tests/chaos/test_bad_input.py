"""Bad input at scale, in-process: >= 1,000 generated pod specs through translation and placement.

Each spec either translates or is refused with ``InvalidRequest`` naming the field; each
translated request either ranks (the explanation renders, and "no candidate" has a message) or is
refused naming the annotation. Nothing else may escape: a ``KeyError`` deep inside is a crash
the pod controller would turn into a retry loop instead of a reason on the pod.
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings

from tests.chaos.badinput import EXISTING, pod_specs
from vkprovider.errors import InvalidRequest
from vkprovider.models import Offer
from vkprovider.placement import PlacementConfig, Placer, PodContext
from vkprovider.placement.explain import decision_dict, no_candidates_message, render_table
from vkprovider.plugins.memory import InMemoryProvider
from vkprovider.translate import translate_pod

EXAMPLES = 1000
OUTCOMES: Counter[str] = Counter()
MISSING = re.compile(r'^(key "[^"]*" not found in )?(configmap|secret) "[^"]*"( not found)? \(.+\)')
FIELD = re.compile(r"^[\w.\[\]/-]+(\[\d+\])?[\w.\[\]/-]*: \S")  # "spec.containers[0].image: ..."


class Source:
    """Two objects exist (ConfigMap ``config``, Secret ``creds``); everything else is missing."""

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return EXISTING["config"] if name == "config" else None  # type: ignore[return-value]

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        return EXISTING["creds"] if name == "creds" else None  # type: ignore[return-value]

    async def list_services(self, namespace: str) -> list[Mapping[str, Any]]:
        return []


def _offer(provider: str, gpu: str, count: int, price: float, capacity: int) -> Offer:
    return Offer(
        provider=provider,
        offer_id=f"{provider}-{gpu.lower()}-{count}",
        gpu_type=gpu,
        gpu_count=count,
        region="eu-west",
        price_per_hour=price,
        capacity=capacity,
    )


def _placer() -> Placer:
    catalogs = {
        "cheap": [_offer("cheap", "H100-SXM-80GB", 1, 2.0, 5), _offer("cheap", "L4", 1, 0.5, 0)],
        "premium": [
            _offer("premium", "H100-SXM-80GB", 8, 20.0, 2),
            _offer("premium", "A100-SXM-80GB", 2, 3.0, 1),
        ],
    }
    providers = {n: InMemoryProvider(n, InMemoryProvider.Settings(offers=o)) for n, o in catalogs.items()}
    placer = Placer(providers, PlacementConfig())
    asyncio.run(placer.refresh())
    return placer


PLACER = _placer()


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _through(pod: dict[str, Any]) -> str:
    try:
        translation = await translate_pod(pod, node_name="vk-fuzz", source=Source())
    except InvalidRequest as exc:
        # names the field ("spec.containers[0].image: ..."), or the missing object and where it
        # was referenced ('configmap "x" not found (volume "cfg")', reason MandatoryConfigMapNotFound)
        named = FIELD.match(str(exc)) or str(exc).startswith("pod") or MISSING.match(str(exc))
        assert named, f"names no field: {exc}"
        assert exc.reason, exc
        return f"refused: {exc.reason}"
    ctx = PodContext(namespace="fuzz", annotations=pod["metadata"].get("annotations") or {})
    try:
        decision = PLACER.rank(translation.request, ctx, detail=True)
    except InvalidRequest as exc:
        assert "vkprovider.io/" in str(exc), f"names no annotation: {exc}"
        return "refused by placement"
    render_table(decision)
    json.dumps(decision_dict(decision))
    if decision.best is None:
        assert no_candidates_message(decision, "fuzz", None)
        return "no candidate (reason given)"
    return "placed"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pod=pod_specs())
def test_every_generated_pod_translates_and_places_or_is_refused_naming_the_field(
    pod: dict[str, Any],
) -> None:
    if not OUTCOMES:
        OUTCOMES["rss_before_mib"] = int(_rss_mib())
    OUTCOMES[asyncio.run(_through(pod))] += 1
    OUTCOMES["specs"] += 1


def test_the_generated_specs_covered_both_outcomes() -> None:
    """Runs after the property above (file order): the mix really exercised both paths."""
    print(f"\nbad input: {dict(OUTCOMES)}; max RSS now {_rss_mib():.0f} MiB")
    assert OUTCOMES["specs"] >= 1000
    assert sum(n for k, n in OUTCOMES.items() if k.startswith("refused: ")) > 0
    assert OUTCOMES["placed"] + OUTCOMES["no candidate (reason given)"] > 0
