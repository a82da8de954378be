"""The respx-backed harnesses patch httpx only while a test runs, never for the session.

The contract harness is session-scoped; a respx router started by its factory stayed registered
after the contract tests, and its catch-all pass-through took the next test file's respx-mocked
requests to the real network (``ConnectError``): the suite passed only in its usual order.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import httpx
import pytest
from respx.mocks import HTTPCoreMocker


@pytest.mark.parametrize(
    ("module_name", "path"), [("harness_runpod", "/v2/pods"), ("harness_vastai", "/api/v1/instances")]
)
async def test_the_router_is_started_only_inside_active(module_name: str, path: str, tmp_path: Path) -> None:
    module = importlib.import_module(module_name)
    async with module.harness(tmp_path) as harness:
        assert HTTPCoreMocker.routers == []  # the session-long harness alone patches nothing
        for _ in range(2):  # entered again for the next test: its routes are still there
            with harness.active():
                assert len(HTTPCoreMocker.routers) == 1
                async with httpx.AsyncClient() as client:
                    answer = await client.get(harness.settings()["base_url"] + path)
                assert answer.status_code == 200  # the fake answers, not the network
            assert HTTPCoreMocker.routers == []
