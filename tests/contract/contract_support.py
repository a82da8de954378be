"""Helpers the contract tests import by name (a module of its own: ``conftest`` is not unique
across test directories, so importing from it picks whichever conftest was loaded first)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml
from harness import Harness

from vkprovider.config import GrpcPluginConfig
from vkprovider.plugins.grpc.supervisor import PluginSupervisor

#: Deadline of every call through GrpcProvider in the suite.
CALL_TIMEOUT = 3.0


def plugin_command(harness: Harness, name: str, config_dir: Path) -> list[str]:
    """``vkprovider plugin serve`` for this harness's adapter, settings in a YAML file."""
    config = config_dir / f"{name}.yaml"
    config.write_text(yaml.safe_dump(harness.settings()))
    serve = ["plugin", "serve", harness.adapter, "--config", str(config), "--name", name]
    return [sys.executable, "-m", "vkprovider", *serve]


def plugin_supervisor(harness: Harness, name: str, config_dir: Path, **kwargs: Any) -> PluginSupervisor:
    spec = GrpcPluginConfig(
        command=plugin_command(harness, name, config_dir),
        call_timeout_seconds=CALL_TIMEOUT,
        shutdown_grace_seconds=3.0,
    )
    pythonpath = os.pathsep.join([*harness.pythonpath, os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    return PluginSupervisor(name, spec, env={"PYTHONPATH": pythonpath}, **kwargs)


def new_uid() -> str:
    return str(uuid.uuid4())
