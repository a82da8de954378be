"""The pytest plugin (``pytest11`` entry point ``vkprovider``): ``--vkprovider-harness`` runs the suite.

With a harness named (option or ini), the fixtures are registered and the suite's tests are
collected as if they were one of the project's test modules, on pytest-asyncio's session loop,
with nothing to copy into the project's own pytest settings. Without one, the plugin only adds
the option, so installing vkprovider changes nobody's test run. A conftest that wants the suite
under its own control imports the fixtures (``from vkprovider.contract.fixtures import *``) and
the tests (``from vkprovider.contract.suite import *`` and ``suite_races``) instead.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

SUITES = ("vkprovider.contract.suite", "vkprovider.contract.suite_races")
FIXTURES = "vkprovider.contract.fixtures"

pytest.register_assert_rewrite(*SUITES, "vkprovider.contract.support")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vkprovider", "vkprovider provider contract suite")
    group.addoption(
        "--vkprovider-harness",
        dest="vkprovider_harness",
        metavar="MODULE:ATTR",
        help="run the provider contract suite against this harness factory",
    )
    parser.addini("vkprovider_harness", "default for --vkprovider-harness (MODULE:ATTR)", default="")


def _spec(config: pytest.Config) -> str:
    return str(config.getoption("vkprovider_harness", None) or config.getini("vkprovider_harness") or "")


def pytest_configure(config: pytest.Config) -> None:
    spec = _spec(config)
    if not spec:
        return
    try:
        fixtures = importlib.import_module(FIXTURES)
    except ImportError as exc:
        raise pytest.UsageError(
            f"the contract suite needs pytest-asyncio: pip install 'vkprovider[contract]' ({exc})"
        ) from exc
    fixtures.load_factory(spec)  # a bad MODULE:ATTR is a usage error now, not N failing tests later
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "vkprovider-contract-fixtures")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Add the suite's tests (before ``-k``/``-m`` deselection runs) unless a module imported them."""
    if not _spec(config):
        return
    present = {i.function.__module__ for i in items if isinstance(i, pytest.Function)}
    for name in SUITES:
        if name in present:
            continue
        path = importlib.import_module(name).__file__
        assert path is not None
        nodeid = name.replace(".", "/") + ".py"  # the suite's own name, wherever it is installed
        module = pytest.Module.from_parent(session, path=Path(path), nodeid=nodeid)
        items.extend(item for item in session.genitems(module) if isinstance(item, pytest.Item))
