"""What the informer caches: the object without managedFields, its repeated strings shared."""

from __future__ import annotations

import json
from typing import Any

from vkprovider.kube.informer import _lean, _Shared


def pod(name: str) -> dict[str, Any]:
    text = json.dumps(
        {
            "metadata": {"name": name, "namespace": "ns", "managedFields": [{"manager": "x"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    loaded: dict[str, Any] = json.loads(text)  # fresh strings, as every watch event has
    return loaded


def test_the_cached_object_is_equal_without_managed_fields_and_shares_its_strings() -> None:
    first, second = _lean(pod("a")), _lean(pod("b"))
    expected = pod("a")
    del expected["metadata"]["managedFields"]
    assert first == expected
    assert first["status"]["phase"] is second["status"]["phase"]
    (a,), (b,) = first["status"]["conditions"], second["status"]["conditions"]
    assert next(iter(a)) is next(iter(b))  # the keys too


def test_the_table_is_bounded_and_starts_afresh() -> None:
    shared = _Shared(limit=3)
    for i in range(10):
        assert shared.share(f"uid-{i}") == f"uid-{i}"
    assert len(shared._strings) <= 3
    value = shared.share({"k": ["x", {"y": 1}]})
    assert value == {"k": ["x", {"y": 1}]}


def test_a_new_version_takes_its_unchanged_parts_from_the_previous_one() -> None:
    first = _lean(pod("a"))
    changed = pod("a")
    changed["metadata"]["resourceVersion"] = "2"
    changed["status"]["conditions"].append({"type": "Initialized", "status": "False"})
    changed["status"]["podIP"] = "10.0.0.1"
    second = _lean(changed, first)
    expected = pod("a")
    del expected["metadata"]["managedFields"]
    expected["metadata"]["resourceVersion"] = "2"
    expected["status"]["conditions"].append({"type": "Initialized", "status": "False"})
    expected["status"]["podIP"] = "10.0.0.1"
    assert second == expected  # every change is there
    assert first["metadata"].get("resourceVersion") is None  # the previous version is untouched
    assert len(first["status"]["conditions"]) == 1
    same = pod("a")
    same["metadata"]["resourceVersion"] = "3"
    third = _lean(same, second)
    assert third["status"] is not second["status"]  # conditions shrank back: a new status
    assert third["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    fourth = _lean(pod("a"), third)
    assert fourth["status"] is third["status"]  # unchanged: the previous version's, not a copy
    assert fourth["metadata"] is not third["metadata"]  # resourceVersion went away: walked anew
    assert "resourceVersion" not in fourth["metadata"]
