"""A test must not leave a server running on the session's shared event loop.

Every test runs on one loop per worker (``asyncio_default_test_loop_scope = "session"``), so a
uvicorn server a test starts and never stops keeps ticking under every later test of that
worker: with any later test that fakes ``asyncio.sleep`` it spins without yielding and the
worker hangs (seen in a CI run: ``test_served_node`` behind a leaked server). The guard below
names the test that left one and stops it, so the next test starts on a clean loop.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import uvicorn


class LeakedServerWarning(UserWarning):
    """A test left a uvicorn server running (the test is named in the message)."""


def running_servers() -> dict[asyncio.Task[Any], uvicorn.Server]:
    """The loop's uvicorn ``Server.serve`` tasks that have not been asked to exit."""
    found: dict[asyncio.Task[Any], uvicorn.Server] = {}
    for task in asyncio.all_tasks():
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        if frame is None or getattr(coro, "__qualname__", "") != "Server.serve":
            continue
        server = frame.f_locals.get("self")
        if isinstance(server, uvicorn.Server) and not server.should_exit:
            found[task] = server
    return found


async def stop_leaked(before: set[asyncio.Task[Any]], test: str) -> list[str]:
    """Stop the servers started since ``before`` was taken; return what was stopped."""
    stopped = []
    for task, server in running_servers().items():
        if task in before:
            continue
        server.should_exit = True
        app = server.config.app
        stopped.append(repr(getattr(app, "app", app)))  # inside vkprovider's BodyLimit, if wrapped
        warnings.warn(
            f"{test} left a uvicorn server running ({stopped[-1]}); stopped it",
            LeakedServerWarning,
            stacklevel=2,
        )
        done, _ = await asyncio.wait({task}, timeout=5)
        if not done:  # open connections it would wait for: not this guard's business
            task.cancel()
    return stopped
