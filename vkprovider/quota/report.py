"""The words of the quota sync's Events and logs: what changed, and which nodes changed it."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from vkprovider.quota.plan import FlavorResource, QueuePlan, format_quantity
from vkprovider.quota.reading import FlavorReading

Counted = dict[str, dict[str, str]]  #: flavor -> node -> state when last written


def describe(changes: Mapping[FlavorResource, tuple[Decimal, Decimal]]) -> str:
    return ", ".join(
        f"{r} {format_quantity(r, old)}->{format_quantity(r, new)}"
        for (_, r), (old, new) in sorted(changes.items())
    )


def synced_message(plan: QueuePlan, readings: list[FlavorReading], before: Counted) -> str:
    """``nominalQuota of flavor a100: nvidia.com/gpu 16->8; nodes: gpu-2 left (cordoned)``, one
    clause per flavor that changed."""
    parts = []
    for reading in readings:
        changes = {k: v for k, v in plan.changes.items() if k[0] == reading.name}
        if not changes:
            continue
        text = f"nominalQuota of flavor {reading.name}: {describe(changes)}"
        moved = node_changes(before.get(reading.name, {}), reading)
        if moved:
            text += f"; nodes: {moved}"
        parts.append(text)
    return "; ".join(parts)


def hold_message(plan: QueuePlan) -> str:
    return (
        "stopPolicy Hold: "
        + "; ".join(s.describe() for s in plan.shortfalls)
        + ". Nothing new is admitted into capacity that is missing; admitted workloads run on. "
        "Lifted once usage fits the offer"
    )


def counted(readings: list[FlavorReading]) -> Counted:
    return {r.name: {n.name: n.state for n in r.nodes} for r in readings}


def node_changes(before: Mapping[str, str], reading: FlavorReading) -> str:
    now = {n.name: n.state for n in reading.nodes}
    parts = []
    for name in sorted(set(before) | set(now)):
        was, is_ = before.get(name), now.get(name)
        if was == is_:
            continue
        if is_ is None:
            parts.append(f"{name} left (deleted)")
        elif is_ == "healthy":
            parts.append(f"{name} joined" + (f" (was {was})" if was else ""))
        elif was == "healthy" or was is None:
            parts.append(f"{name} left ({is_})" if was else f"{name} not counted ({is_})")
    return ", ".join(parts)
