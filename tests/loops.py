"""Run a directory's async tests on both event loops the service can run on.

``vkprovider serve`` runs on uvloop where it is installed (vkprovider.eventloop), and code that
drives transports directly (the lean HTTP client, the servers' admission and TLS) meets uvloop's
transports there, which differ from asyncio's (uvloop's TLS transport is not an
``asyncio.Transport`` subclass, for one). A ``conftest.py`` that imports this hook runs each
async test of its directory once per loop, ids ``[asyncio]`` and ``[uvloop]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from vkprovider import eventloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    factories: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
    uvloop = eventloop.loop_factory("auto")
    if uvloop is not None:
        factories["uvloop"] = uvloop
    return factories
