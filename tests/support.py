"""Helpers shared by every test package."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
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
