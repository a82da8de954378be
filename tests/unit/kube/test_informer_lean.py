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
