"""vkprovider's own run of the contract suite: every bundled adapter's harness, through the plugin.

The fixtures are the plugin's (``vkprovider.contract.fixtures``); only ``harness`` is overridden,
parametrized over every ``harness_*.py`` here (see README.md).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vkprovider.contract.fixtures import harness_active, node, provider, variant
from vkprovider.contract.harness import Harness

__all__ = ["harness_active", "node", "provider", "variant"]

HERE = Path(__file__).parent
HARNESSES = sorted(p.stem for p in HERE.glob("harness_*.py"))


@pytest.fixture(scope="session", params=HARNESSES)
async def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    module_name: str = request.param
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        pytest.skip(f"{module_name}: adapter not importable: {exc}")
    async with module.harness(tmp_path_factory.mktemp(module_name)) as started:
        yield started
