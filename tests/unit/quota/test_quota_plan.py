"""Locating the synced field, deciding its value, and the patch that writes only it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from vkprovider.quota.plan import QuotaTargetError, format_quantity, in_use, locate, patch_ops, plan

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


def test_plan_lowers_to_what_is_offered_but_never_below_what_is_used() -> None:
    current = {"nvidia.com/gpu": Decimal(16), "cpu": Decimal(128)}
    result = plan(current, {"nvidia.com/gpu": Decimal(4), "cpu": Decimal(64)}, {"nvidia.com/gpu": Decimal(8)})
    assert result.target == {"nvidia.com/gpu": 8, "cpu": 64}
    assert result.held == {"nvidia.com/gpu": (4, 8)}
    assert result.changes == {"nvidia.com/gpu": (16, 8), "cpu": (128, 64)}


def test_plan_without_a_difference_changes_nothing() -> None:
    same = {"nvidia.com/gpu": Decimal(16)}
    assert plan(same, same, {}).changes == {}


def test_patch_is_guarded_by_resource_version_and_replaces_only_the_changed_fields() -> None:
    where = locate(queue(), "training", "local-gpu", RESOURCES)
    ops = patch_ops("42", where.pointers, {"nvidia.com/gpu": (Decimal(16), Decimal(8))})
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "replace", "path": "/spec/resourceGroups/1/flavors/1/resources/0/nominalQuota", "value": "8"},
    ]


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
