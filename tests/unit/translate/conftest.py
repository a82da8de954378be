"""Shared fixtures for translation tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from translate_helpers import BASE_POD, DictSource


@pytest.fixture
def pod() -> Callable[..., dict[str, Any]]:
    """Build a pod: ``pod(spec={...}, metadata={...}, container={...})`` merges into the base."""

    def build(
        *, spec: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None, **container: Any
    ) -> dict[str, Any]:
        result = copy.deepcopy(BASE_POD)
        result["spec"]["containers"][0].update(container)
        result["spec"].update(spec or {})
        result["metadata"].update(metadata or {})
        return result

    return build


@pytest.fixture
def source() -> DictSource:
    return DictSource()


@pytest.fixture
def source_cls() -> type[DictSource]:
    return DictSource
