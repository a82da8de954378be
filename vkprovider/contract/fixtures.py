"""The suite's fixtures: the harness named on the command line, and the provider in each variant.

A conftest may override ``harness`` (vkprovider's own ``tests/contract/`` parametrizes it over
every bundled adapter); ``provider`` then builds on the override. Every fixture runs on the
session's event loop, whatever the project's pytest-asyncio settings are.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import pytest_asyncio

from vkprovider.config import ProviderConfig
from vkprovider.contract.harness import Harness
from vkprovider.contract.support import CALL_TIMEOUT, plugin_supervisor
from vkprovider.plugins.api import Provider
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.guard import guard
from vkprovider.plugins.registry import build_provider, instantiate

VARIANTS = ("inprocess", "grpc", "subprocess")
#: How long a plugin subprocess may take to start and answer its first call.
START_TIMEOUT = 60.0
HarnessFactory = Callable[[Path], AbstractAsyncContextManager[Harness]]


def harness_spec(config: pytest.Config) -> str | None:
    """``--vkprovider-harness``, else the ``vkprovider_harness`` ini option, else None."""
    spec = config.getoption("vkprovider_harness", None) or config.getini("vkprovider_harness")
    return str(spec) if spec else None


def load_factory(spec: str) -> HarnessFactory:
    """``module:attr`` → the harness factory (an async context manager function of ``tmp_path``)."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        attr = "harness"
    try:
        factory: HarnessFactory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise pytest.UsageError(f"--vkprovider-harness={spec}: cannot load {attr!r}: {exc}") from exc
    return factory


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    spec = harness_spec(request.config)
    if spec is None:
        raise pytest.UsageError("name a harness: --vkprovider-harness=module:attr (or override `harness`)")
    async with load_factory(spec)(tmp_path_factory.mktemp("harness")) as started:
        yield started


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=VARIANTS)
async def provider(
    request: pytest.FixtureRequest, harness: Harness, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Provider]:
    """A ready provider for ``harness`` in one transport variant (its name says which)."""
    variant: str = request.param
    name = f"contract-{variant}"
    if variant != "subprocess" and not harness.adapter:
        pytest.skip("not a Python adapter: only the plugin subprocess variant applies")
    if variant == "inprocess":
        built = build_provider(
            ProviderConfig(name=name, adapter=harness.adapter, settings=harness.settings())
        )
        yield built
        await built.close()
    elif variant == "grpc":
        sockdir = tmp_path_factory.mktemp("sock")
        adapter = instantiate(harness.adapter, name, harness.settings())
        server = await serve_adapter(adapter, f"unix:{sockdir}/p.sock")
        dialled = guard(GrpcProvider.dial(name, server.address, call_timeout=CALL_TIMEOUT))
        yield dialled
        await dialled.close()
        await server.stop(0)
        await adapter.close()
    else:
        if not harness.shared_backend:
            pytest.skip("harness knobs do not reach a plugin subprocess")
        supervisor = plugin_supervisor(harness, name, tmp_path_factory.mktemp("plugin"))
        # Wait out the plugin's start (an interpreter's imports on a loaded machine can take longer
        # than one call's deadline) before the tests' calls run under CALL_TIMEOUT.
        await GrpcProvider(name, supervisor, call_timeout=START_TIMEOUT).info()
        supervised = guard(GrpcProvider(name, supervisor, call_timeout=CALL_TIMEOUT))
        yield supervised
        await supervised.close()


@pytest.fixture(autouse=True)
def harness_active(request: pytest.FixtureRequest) -> Iterator[None]:
    """``harness.active()`` around each test that uses the harness, and only then: process-wide
    mocks (a respx router) must not outlive the test and answer another test's requests."""
    if "harness" not in request.fixturenames:
        yield
        return
    harness: Harness = request.getfixturevalue("harness")
    with harness.active():
        yield


@pytest.fixture
def variant(provider: Provider) -> str:
    return provider.name.removeprefix("contract-")


@pytest.fixture
def node() -> str:
    return f"node-{uuid.uuid4().hex[:8]}"
