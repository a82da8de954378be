"""A harness for a plugin that is "not Python" as far as the suite knows: no ``adapter``, only a
command. The command happens to be a Python process serving the memory cloud, but the suite sees
just ``[binary, args...]`` plus a backend it controls, as it would for a Go or Rust plugin."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from harness_memory import MemoryHarness

from vkprovider.contract.harness import Harness


class ExternalCommandHarness(MemoryHarness):
    adapter = ""

    def plugin_command(self, name: str, config_file: Path) -> list[str]:
        serve = ["plugin", "serve", "harness_memory:MemoryCloudProvider", "--config", str(config_file)]
        return [sys.executable, "-m", "vkprovider", *serve, "--name", name]


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    yield ExternalCommandHarness(tmp_path / "externalcloud")
