"""Where the synced field lives in a ClusterQueue, what it should become, and how to say so.

The sync owns exactly ``spec.resourceGroups[*].flavors[<flavor>].resources[<r>].nominalQuota``
for the configured resources. It never sets a quota below what admitted workloads already
hold (``status.flavorsReservation`` / ``flavorsUsage``): Kueue would preempt running training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from vkprovider.errors import ConfigError, InvalidRequest
from vkprovider.translate.quantity import parse_quantity

JSON = dict[str, Any]
_GI = Decimal(1024**3)
_MI = Decimal(1024**2)


class QuotaTargetError(ConfigError):
    """The configured ClusterQueue, flavor or resource does not exist: nothing is written."""


@dataclass(frozen=True)
class FlavorQuota:
    pointers: dict[str, str]  #: resource -> JSON pointer of its nominalQuota
    current: dict[str, Decimal]


def locate(cq: JSON | None, name: str, flavor: str, resources: list[str]) -> FlavorQuota:
    if cq is None:
        raise QuotaTargetError(f"quota.cluster_queue: ClusterQueue {name!r} does not exist")
    pointers: dict[str, str] = {}
    current: dict[str, Decimal] = {}
    found_flavor = False
    for g, group in enumerate(cq.get("spec", {}).get("resourceGroups") or []):
        for f, entry in enumerate(group.get("flavors") or []):
            if entry.get("name") != flavor:
                continue
            found_flavor = True
            for r, resource in enumerate(entry.get("resources") or []):
                if resource.get("name") in resources:
                    pointers[resource["name"]] = (
                        f"/spec/resourceGroups/{g}/flavors/{f}/resources/{r}/nominalQuota"
                    )
                    current[resource["name"]] = _quantity(resource.get("nominalQuota", 0))
    if not found_flavor:
        raise QuotaTargetError(f"quota.flavor: ClusterQueue {name!r} has no flavor {flavor!r}")
    missing = [r for r in resources if r not in pointers]
    if missing:
        raise QuotaTargetError(
            f"quota.resources: flavor {flavor!r} of ClusterQueue {name!r} has no quota for {', '.join(missing)}"
        )
    return FlavorQuota(pointers, current)


def in_use(cq: JSON, flavor: str) -> dict[str, Decimal]:
    """The larger of reserved and used quota per resource, for this flavor."""
    used: dict[str, Decimal] = {}
    status = cq.get("status") or {}
    for key in ("flavorsReservation", "flavorsUsage"):
        for entry in status.get(key) or []:
            if entry.get("name") != flavor:
                continue
            for resource in entry.get("resources") or []:
                amount = _quantity(resource.get("total", 0))
                used[resource["name"]] = max(used.get(resource["name"], Decimal(0)), amount)
    return used


@dataclass
class Plan:
    target: dict[str, Decimal]
    changes: dict[str, tuple[Decimal, Decimal]] = field(default_factory=dict)  #: old, new
    held: dict[str, tuple[Decimal, Decimal]] = field(default_factory=dict)  #: offered, kept at


def plan(current: Mapping[str, Decimal], offered: Mapping[str, Decimal], used: Mapping[str, Decimal]) -> Plan:
    result = Plan(target={})
    for name, want in offered.items():
        floor = used.get(name, Decimal(0))
        target = max(want, floor)
        if target > want:
            result.held[name] = (want, target)
        result.target[name] = target
        if current.get(name) != target:
            result.changes[name] = (current.get(name, Decimal(0)), target)
    return result


def patch_ops(
    resource_version: str, pointers: Mapping[str, str], changes: Mapping[str, tuple[Decimal, Decimal]]
) -> list[JSON]:
    """A JSON patch guarded by resourceVersion that replaces only the synced fields."""
    ops: list[JSON] = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
    for name, (_, new) in sorted(changes.items()):
        ops.append({"op": "replace", "path": pointers[name], "value": format_quantity(name, new)})
    return ops


def format_quantity(resource: str, value: Decimal) -> str:
    """A canonical quantity string (compared by value, so the form only has to be readable)."""
    if resource == "memory" or resource.endswith("storage"):
        for unit, size in (("Gi", _GI), ("Mi", _MI)):
            if value % size == 0:
                return f"{int(value / size)}{unit}"
        return str(int(value))
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value())}m"


def _quantity(raw: object) -> Decimal:
    try:
        return parse_quantity(raw)
    except InvalidRequest:
        return Decimal(0)
