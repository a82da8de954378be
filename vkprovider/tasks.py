"""Supervised long-running loops (DESIGN §7): a crash is logged with its traceback and the loop
restarts with backoff, instead of dying silently inside a TaskGroup or taking the service down.

Cancellation always propagates: supervision is for bugs and transient failures, not for
shutdown. A loop that *returns* is treated as finished on purpose and is not restarted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from vkprovider.retry import Backoff, Sleep

log = logging.getLogger(__name__)


async def supervise(
    name: str,
    coro_factory: Callable[[], Awaitable[None]],
    *,
    restart_delay: float = 1.0,
    max_delay: float = 60.0,
    healthy_after: float = 60.0,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run ``coro_factory()`` until it returns; restart it after each crash.

    The delay doubles on consecutive crashes (up to ``max_delay``; the project's one backoff
    curve, ``vkprovider.retry.Backoff``) and resets once a run has lasted ``healthy_after`` seconds, so a loop that crashes once a day restarts quickly while a
    crash loop does not spin. ``sleep`` and ``clock`` are injected by tests (patching
    ``asyncio.sleep`` or ``time.monotonic`` would change them for every task on the loop, and
    the loop's own clock).
    """
    backoff = Backoff(base=restart_delay, cap=max_delay)
    while True:
        started = clock()
        try:
            await coro_factory()
        except asyncio.CancelledError:
            raise
        except Exception:
            if clock() - started >= healthy_after:
                backoff.reset()
            delay = backoff.next()
            log.exception("task %s crashed; restarting in %.1fs", name, delay, extra={"task": name})
            await sleep(delay)
        else:
            log.debug("task %s finished", name, extra={"task": name})
            return
