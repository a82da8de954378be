"""Locating the synced field, deciding its value, and the patch that writes only it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from vkprovider.quota.plan import (
    HOLD_ANNOTATION,
    QuotaTargetError,
    format_quantity,
    held_by_sync,
    hold_action,
    in_use,
    locate,
    nominal_in,
    patch_ops,
)

RESOURCES = ["nvidia.com/gpu", "cpu", "memory"]


def queue() -> dict[str, Any]:
    return {
        "metadata": {"name": "training", "resourceVersion": "42"},
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["example.com/x"], "flavors": [{"name": "other", "resources": []}]},
                {
                    "coveredResources": RESOURCES,
                    "flavors": [
                        {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 99}]},
                        {
                            "name": "local-gpu",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 0},
                                {"name": "cpu", "nominalQuota": "128"},
                                {"name": "memory", "nominalQuota": "1Ti"},
                            ],
                        },
                    ],
                },
            ]
        },
        "status": {
            "flavorsReservation": [
                {"name": "local-gpu", "resources": [{"name": "nvidia.com/gpu", "total": "8"}]}
            ],
            "flavorsUsage": [
                {"name": "local-gpu", "resources": [{"name": "nvidia.com/gpu", "total": "6"}]},
                {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "total": "50"}]},
            ],
        },
    }


def test_locate_points_at_the_flavors_own_entries_only() -> None:
    where = locate(queue(), "training", "local-gpu", RESOURCES)
    assert where.pointers["nvidia.com/gpu"] == "/spec/resourceGroups/1/flavors/1/resources/0/nominalQuota"
    assert where.current == {"nvidia.com/gpu": 16, "cpu": 128, "memory": 1024**4}


@pytest.mark.parametrize(
    ("cq", "flavor", "resources", "field"),
    [
        (None, "local-gpu", RESOURCES, "quota.cluster_queue"),
        (queue(), "nope", RESOURCES, "quota.flavor"),
        (queue(), "local-gpu", [*RESOURCES, "example.com/fpga"], "quota.resources"),
    ],
)
def test_a_missing_target_is_a_clear_error(cq: Any, flavor: str, resources: list[str], field: str) -> None:
    with pytest.raises(QuotaTargetError, match=field):
        locate(cq, "training", flavor, resources)


def test_in_use_takes_the_larger_of_reservation_and_usage_for_the_flavor() -> None:
    assert in_use(queue(), "local-gpu") == {"nvidia.com/gpu": 8}


def test_nominal_in_reads_the_flavors_quota() -> None:
    assert nominal_in(queue(), "spot") == {"nvidia.com/gpu": 99}
    assert nominal_in(queue(), "nope") == {}


def pointers() -> dict[tuple[str, str], str]:
    where = locate(queue(), "training", "local-gpu", RESOURCES)
    return {("local-gpu", r): p for r, p in where.pointers.items()}


def test_patch_is_guarded_by_resource_version_and_replaces_only_the_changed_fields() -> None:
    ops = patch_ops(queue(), pointers(), {("local-gpu", "nvidia.com/gpu"): (Decimal(16), Decimal(8))}, None)
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "replace", "path": "/spec/resourceGroups/1/flavors/1/resources/0/nominalQuota", "value": "8"},
    ]


def test_a_hold_sets_stop_policy_and_marks_the_queue_as_the_syncs() -> None:
    bare = queue()
    ops = patch_ops(bare, pointers(), {}, "hold")
    assert ops[1:] == [
        {"op": "add", "path": "/spec/stopPolicy", "value": "Hold"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {HOLD_ANNOTATION: ops[2]["value"][HOLD_ANNOTATION]},
        },
    ]
    annotated = queue()
    annotated["metadata"]["annotations"] = {"team": "ml"}  # others' annotations stay
    assert patch_ops(annotated, pointers(), {}, "hold")[2] == {
        "op": "add",
        "path": "/metadata/annotations/vkprovider.io~1quota-hold",
        "value": ops[2]["value"][HOLD_ANNOTATION],
    }
    assert patch_ops(annotated, pointers(), {}, "release")[1:] == [
        {"op": "add", "path": "/spec/stopPolicy", "value": "None"},
        {"op": "remove", "path": "/metadata/annotations/vkprovider.io~1quota-hold"},
    ]


def with_policy(policy: str | None, ours: bool) -> dict[str, Any]:
    cq = queue()
    if policy is not None:
        cq["spec"]["stopPolicy"] = policy
    if ours:
        cq["metadata"]["annotations"] = {HOLD_ANNOTATION: "x"}
    return cq


@pytest.mark.parametrize(
    ("policy", "ours", "want", "action"),
    [
        (None, False, True, "hold"),  # Kueue's default is None
        ("None", False, True, "hold"),
        ("Hold", True, True, None),  # already held by the sync
        ("Hold", False, True, None),  # an operator's hold already stops admission: leave it
        ("HoldAndDrain", False, True, None),
        ("Hold", True, False, "release"),
        ("Hold", False, False, None),  # an operator's hold is never lifted by the sync
        ("HoldAndDrain", True, False, "unmark"),  # an operator escalated ours: theirs now
        ("None", True, False, "unmark"),
        ("None", True, True, "hold"),  # an operator lifted ours while usage still exceeds the offer
        ("None", False, False, None),
    ],
)
def test_the_sync_lifts_only_its_own_hold(
    policy: str | None, ours: bool, want: bool, action: str | None
) -> None:
    assert hold_action(with_policy(policy, ours), want) == action


def test_held_by_sync_needs_both_the_hold_and_the_mark() -> None:
    assert held_by_sync(with_policy("Hold", True))
    assert not held_by_sync(with_policy("Hold", False))
    assert not held_by_sync(with_policy("HoldAndDrain", True))


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("nvidia.com/gpu", Decimal(8), "8"),
        ("cpu", Decimal("127.5"), "127500m"),
        ("memory", Decimal(512 * 1024**3), "512Gi"),
        ("memory", Decimal(3 * 1024**2), "3Mi"),
        ("memory", Decimal(1000), "1000"),
    ],
)
def test_quantities_are_written_in_a_readable_canonical_form(
    resource: str, value: Decimal, text: str
) -> None:
    assert format_quantity(resource, value) == text
