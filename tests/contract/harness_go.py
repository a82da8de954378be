"""The Go starter's example plugin (sdk/go/examples/memory) under the real supervisor.

The plugin is the memory cloud of ``harness_memory.py`` written in Go on ``sdk/go/plugin``, so
the knobs are the same files. It is not a Python adapter (``adapter = ""``): only the subprocess
variant runs, with the plugin built by ``go build`` from sdk/go's pinned go.mod. Skipped, with
the reason, when no Go toolchain is on PATH.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from harness_memory import MemoryHarness

from vkprovider.contract.harness import Harness

SDK = Path(__file__).resolve().parents[2] / "sdk" / "go"


class GoMemoryHarness(MemoryHarness):
    adapter = ""

    def __init__(self, root: Path, binary: Path) -> None:
        super().__init__(root)
        self.binary = binary

    def plugin_command(self, name: str, config_file: Path) -> list[str]:
        return [str(self.binary), "--config", str(config_file), "--name", name]


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go toolchain not found on PATH: the Go starter (sdk/go) is not checked")
    binary = tmp_path / "go-memory-plugin"
    build = await asyncio.create_subprocess_exec(
        go,
        "build",
        "-o",
        str(binary),
        "./examples/memory",
        cwd=SDK,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await build.communicate()
    assert build.returncode == 0, f"go build of sdk/go/examples/memory failed:\n{output.decode()}"
    yield GoMemoryHarness(tmp_path / "gomemory", binary)
