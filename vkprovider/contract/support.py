"""Helpers the suite and its fixtures share: the plugin subprocess, fresh UIDs, waiting, knobs."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from vkprovider.config import GrpcPluginConfig
from vkprovider.contract.harness import Harness
from vkprovider.plugins.grpc.supervisor import PluginSupervisor

T = TypeVar("T")

#: Deadline of every call through GrpcProvider in the suite.
CALL_TIMEOUT = 3.0


def plugin_command(harness: Harness, name: str, config_dir: Path) -> list[str]:
    """The harness's plugin command, its settings written to ``<config_dir>/<name>.json``.

    JSON is valid YAML, so ``vkprovider plugin serve --config`` reads it, and a plugin in any
    language can parse it with its standard library.
    """
    config = config_dir / f"{name}.json"
    config.write_text(json.dumps(harness.settings(), indent=2))
    return harness.plugin_command(name, config)


def plugin_supervisor(harness: Harness, name: str, config_dir: Path, **kwargs: Any) -> PluginSupervisor:
    """A real :class:`PluginSupervisor` running the harness's plugin command. Its start-up
    allowance is generous: a plugin that imports slowly on a loaded CI machine is not a contract
    failure (the service's own default stays 15 s)."""
    kwargs.setdefault("start_timeout", 60.0)
    spec = GrpcPluginConfig(
        command=plugin_command(harness, name, config_dir),
        call_timeout_seconds=CALL_TIMEOUT,
        shutdown_grace_seconds=3.0,
    )
    pythonpath = os.pathsep.join([*harness.pythonpath, os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    env = {"PYTHONPATH": pythonpath, **harness.plugin_env()}
    return PluginSupervisor(name, spec, env=env, **kwargs)


def new_uid() -> str:
    return str(uuid.uuid4())


async def knob(call: Awaitable[T]) -> T:
    """Turn a knob; skip the test if this harness does not offer it."""
    try:
        return await call
    except NotImplementedError:
        pytest.skip("harness does not offer this knob")


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)
