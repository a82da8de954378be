"""What the respx-backed cloud harnesses share: the knobs and the harness side of them.

A fake cloud keeps its objects in memory behind a respx router; each handler first applies the
knobs of its endpoint group (a delay that counts starts and cancellations, then a one-shot
failure turned into the HTTP answer the real API gives for that error class). The harness turns
the contract suite's operations into endpoint groups. Only the cloud's shapes and its
``http_error`` differ between clouds.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import httpx
import respx

from vkprovider.contract.harness import DelayStats, Harness, Op
from vkprovider.plugins.api import ProviderError

SPEC_HELPER = Path(__file__).resolve().parents[1] / "unit" / "providers" / "openapi.py"


def load_spec_helper() -> ModuleType | None:
    """tests/unit/providers/openapi.py, if present (it validates against the published spec)."""
    spec = importlib.util.spec_from_file_location("vk_contract_openapi", SPEC_HELPER)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class KnobbedCloud:
    """Failures, delays and their counts per endpoint group, and the (not yet started) router."""

    def __init__(self) -> None:
        self.failures: dict[str, ProviderError] = {}
        self.delays: dict[str, float] = {}
        self.started: dict[str, int] = defaultdict(int)
        self.cancelled: dict[str, int] = defaultdict(int)
        self.router = respx.mock(assert_all_called=False, assert_all_mocked=False)

    def http_error(self, error: ProviderError) -> httpx.Response:
        """The answer the real API gives for a failure of this class."""
        raise NotImplementedError

    async def knobs(self, endpoint: str) -> httpx.Response | None:
        seconds = self.delays.get(endpoint, 0.0)
        if seconds:
            self.started[endpoint] += 1
            try:
                await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                self.cancelled[endpoint] += 1
                raise
        error = self.failures.pop(endpoint, None)
        return self.http_error(error) if error is not None else None


class RespxHarness(Harness):
    """A harness over a :class:`KnobbedCloud` in this process (the subprocess variant skips)."""

    shared_backend = False
    #: contract operation → the fake endpoint group its HTTP call hits
    endpoints: ClassVar[dict[str, str]]

    def __init__(self, fake: KnobbedCloud) -> None:
        self.fake = fake

    def active(self) -> contextlib.AbstractContextManager[object]:
        """The respx router, started around each test only: it patches httpx process-wide and its
        catch-all pass-through would take every other test's requests to the real network."""
        return self.fake.router

    async def fail_next(self, op: Op, error: ProviderError) -> None:
        self.fake.failures[self.endpoints[op]] = error

    async def delay(self, op: Op, seconds: float) -> None:
        self.fake.delays[self.endpoints[op]] = seconds

    async def delay_stats(self, op: Op) -> DelayStats:
        endpoint = self.endpoints[op]
        return DelayStats(started=self.fake.started[endpoint], cancelled=self.fake.cancelled[endpoint])
