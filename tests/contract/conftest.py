"""Build every adapter's provider in every transport variant (see harness.py and README.md)."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contract_support import CALL_TIMEOUT, plugin_supervisor
from harness import Harness

from vkprovider.config import ProviderConfig
from vkprovider.plugins.api import Provider
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.guard import guard
from vkprovider.plugins.registry import build_provider, instantiate

HERE = Path(__file__).parent
HARNESSES = sorted(p.stem for p in HERE.glob("harness_*.py"))
VARIANTS = ("inprocess", "grpc", "subprocess")


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


@pytest.fixture(scope="session", params=VARIANTS)
async def provider(
    request: pytest.FixtureRequest, harness: Harness, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Provider]:
    """A ready provider for ``harness`` in one transport variant (its name says which)."""
    variant: str = request.param
    name = f"contract-{variant}"
    if variant == "inprocess":
        provider = build_provider(
            ProviderConfig(name=name, adapter=harness.adapter, settings=harness.settings())
        )
        yield provider
        await provider.close()
    elif variant == "grpc":
        sockdir = tmp_path_factory.mktemp("sock")
        adapter = instantiate(harness.adapter, name, harness.settings())
        server = await serve_adapter(adapter, f"unix:{sockdir}/p.sock")
        provider = guard(GrpcProvider.dial(name, server.address, call_timeout=CALL_TIMEOUT))
        yield provider
        await provider.close()
        await server.stop(0)
        await adapter.close()
    else:
        if not harness.shared_backend:
            pytest.skip("harness knobs do not reach a plugin subprocess")
        supervisor = plugin_supervisor(harness, name, tmp_path_factory.mktemp("plugin"))
        provider = guard(GrpcProvider(name, supervisor, call_timeout=CALL_TIMEOUT))
        yield provider
        await provider.close()


@pytest.fixture
def variant(provider: Provider) -> str:
    return provider.name.removeprefix("contract-")


@pytest.fixture
def node() -> str:
    return f"node-{uuid.uuid4().hex[:8]}"
