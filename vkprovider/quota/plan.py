"""Where the synced fields live in a ClusterQueue, what they should become, and the one patch.

The sync owns, per configured queue, ``spec.resourceGroups[*].flavors[<flavor>].resources[<r>]
.nominalQuota`` of the configured flavors and resources, and ``spec.stopPolicy`` while it holds
the queue (marked by the annotation ``vkprovider.io/quota-hold``, so a hold an operator set is
never lifted by the sync, and a new term knows which hold is its own).

*Nominal* is the queue's share of what the flavor's healthy nodes offer, never more: not what
admitted workloads use (that total includes GPUs borrowed from the cohort; raising the nominal
to it would lend the cohort capacity that does not exist). Kueue never evicts because a nominal
dropped below usage.

*Hold*: while a flavor's admitted usage (every ClusterQueue with quota in it) exceeds what its
nodes offer, capacity is missing; each queue using more than its share of that flavor gets
``stopPolicy: Hold`` (Kueue admits nothing new into it, cancels reservations not yet admitted,
and lets admitted workloads run to completion), lifted once usage fits again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from vkprovider.errors import ConfigError, InvalidRequest
from vkprovider.translate.quantity import parse_quantity

JSON = dict[str, Any]
HOLD_ANNOTATION = "vkprovider.io/quota-hold"
HOLD_REASON = "admitted usage exceeds what the healthy nodes offer (docs/kueue.md)"
_GI = Decimal(1024**3)
_MI = Decimal(1024**2)
FlavorResource = tuple[str, str]
HoldAction = Literal["hold", "release", "unmark"]


class QuotaTargetError(ConfigError):
    """The configured ClusterQueue, flavor or resource does not exist: nothing is written."""


@dataclass(frozen=True)
class FlavorQuota:
    pointers: dict[str, str]  #: resource -> JSON pointer of its nominalQuota
    current: dict[str, Decimal]


def locate(
    cq: JSON | None,
    name: str,
    flavor: str,
    resources: list[str],
    *,
    queue_field: str = "quota.cluster_queue",
    flavor_field: str = "quota.flavor",
    resources_field: str = "quota.resources",
) -> FlavorQuota:
    if cq is None:
        raise QuotaTargetError(f"{queue_field}: ClusterQueue {name!r} does not exist")
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
        raise QuotaTargetError(f"{flavor_field}: ClusterQueue {name!r} has no flavor {flavor!r}")
    missing = [r for r in resources if r not in pointers]
    if missing:
        raise QuotaTargetError(
            f"{resources_field}: flavor {flavor!r} of ClusterQueue {name!r} has no quota for {', '.join(missing)}"
        )
    return FlavorQuota(pointers, current)


def has_flavor(cq: JSON, flavor: str) -> bool:
    return any(
        entry.get("name") == flavor
        for group in cq.get("spec", {}).get("resourceGroups") or []
        for entry in group.get("flavors") or []
    )


def nominal_in(cq: JSON, flavor: str) -> dict[str, Decimal]:
    """The flavor's nominalQuota per resource in this ClusterQueue."""
    out: dict[str, Decimal] = {}
    for group in cq.get("spec", {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            if entry.get("name") == flavor:
                for resource in entry.get("resources") or []:
                    out[resource["name"]] = _quantity(resource.get("nominalQuota", 0))
    return out


def in_use(cq: JSON, flavor: str) -> dict[str, Decimal]:
    """The larger of reserved and admitted quota per resource of this flavor (``total``: what
    the queue's workloads hold, borrowed or not, i.e. what they take of the flavor's nodes)."""
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


@dataclass(frozen=True)
class Shortfall:
    """One flavor/resource of one queue whose usage is part of capacity that is missing."""

    flavor: str
    resource: str
    flavor_used: Decimal  #: every queue with quota in the flavor
    offered: Decimal
    queue_used: Decimal
    share: Decimal

    def describe(self) -> str:
        r = self.resource
        return (
            f"flavor {self.flavor} {r}: admitted workloads use {format_quantity(r, self.flavor_used)} "
            f"(this queue {format_quantity(r, self.queue_used)}, its share {format_quantity(r, self.share)}), "
            f"the healthy nodes offer {format_quantity(r, self.offered)}"
        )


@dataclass
class QueuePlan:
    queue: str
    target: dict[FlavorResource, Decimal] = field(default_factory=dict)
    changes: dict[FlavorResource, tuple[Decimal, Decimal]] = field(default_factory=dict)  #: old, new
    shortfalls: list[Shortfall] = field(default_factory=list)  #: why it should be held (if any)
    hold: HoldAction | None = None  #: what to do with stopPolicy this round

    @property
    def writes(self) -> bool:
        return bool(self.changes) or self.hold is not None


def held_by_sync(cq: JSON) -> bool:
    """``stopPolicy: Hold`` set by the sync (its annotation is on the queue)."""
    marked = HOLD_ANNOTATION in ((cq.get("metadata") or {}).get("annotations") or {})
    return marked and (cq.get("spec") or {}).get("stopPolicy") == "Hold"


def hold_action(cq: JSON, want: bool) -> HoldAction | None:
    """``hold`` a running queue; ``release`` only a hold the sync set (still ``Hold``); ``unmark``
    when an operator changed a hold of ours (to ``None`` or ``HoldAndDrain``): theirs now."""
    policy = (cq.get("spec") or {}).get("stopPolicy") or "None"
    ours = HOLD_ANNOTATION in ((cq.get("metadata") or {}).get("annotations") or {})
    if want:
        return "hold" if policy == "None" else None  # a hold of anyone's already stops admission
    if ours:
        return "release" if policy == "Hold" else "unmark"
    return None


def patch_ops(
    cq: JSON,
    pointers: Mapping[FlavorResource, str],
    changes: Mapping[FlavorResource, tuple[Decimal, Decimal]],
    hold: HoldAction | None,
) -> list[JSON]:
    """One JSON patch, guarded by resourceVersion, that replaces only the synced fields."""
    meta = cq["metadata"]
    ops: list[JSON] = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}]
    for key, (_, new) in sorted(changes.items()):
        ops.append({"op": "replace", "path": pointers[key], "value": format_quantity(key[1], new)})
    mark = "/metadata/annotations/" + HOLD_ANNOTATION.replace("~", "~0").replace("/", "~1")
    if hold == "hold":
        ops.append({"op": "add", "path": "/spec/stopPolicy", "value": "Hold"})
        if meta.get("annotations"):
            ops.append({"op": "add", "path": mark, "value": HOLD_REASON})
        else:
            ops.append(
                {"op": "add", "path": "/metadata/annotations", "value": {HOLD_ANNOTATION: HOLD_REASON}}
            )
    elif hold == "release":
        ops += [{"op": "add", "path": "/spec/stopPolicy", "value": "None"}, {"op": "remove", "path": mark}]
    elif hold == "unmark":
        ops.append({"op": "remove", "path": mark})
    return ops


def format_quantity(resource: str, value: Decimal) -> str:
    """A canonical quantity string (compared by value, so the form only has to be readable)."""
    if resource == "memory" or resource.endswith("storage"):
        for suffix, size in (("Gi", _GI), ("Mi", _MI)):
            if value % size == 0:
                return f"{int(value / size)}{suffix}"
        return str(int(value))
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value())}m"


def _quantity(raw: object) -> Decimal:
    try:
        return parse_quantity(raw)
    except InvalidRequest:
        return Decimal(0)
