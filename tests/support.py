"""Helpers shared by every test package."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float = 60.0, interval: float = 0.2
) -> Any:
    """Poll ``check`` until it returns something truthy and return it; fail (never hang) after
    ``timeout`` seconds with ``TimeoutError``. No timing is asserted, only the outcome."""
    async with asyncio.timeout(timeout):
        while True:
            result = await check()
            if result:
                return result
            await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def fakecloud_process(config: dict[str, Any], directory: Path) -> AsyncIterator[str]:
    """A fakecloud in a process of its own (``vkprovider fakecloud``), yielding its URL.

    In the test's own event loop a fakecloud answers only while the test does not block that
    loop (a hypothesis draw, a sync read); a stall of seconds reads to vkprovider as an outage
    and marks the provider unhealthy. Tests that are not about the cloud's behaviour under such
    stalls run it apart."""
    path = directory / "fakecloud.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "fakecloud", "--port", "0", "--config", str(path),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()
        if not line.startswith("fakecloud listening on "):
            raise RuntimeError(f"fakecloud did not start: {line!r}")
        yield line.rsplit(" ", 1)[1]
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()
