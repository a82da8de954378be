"""Which asyncio event loop a long-running command runs on.

The service spends a large share of its CPU in the event loop itself (scheduling callbacks,
socket reads and writes, TLS records): with the standard loop that machinery is Python code.
uvloop implements the same loop on libuv in compiled code (uvicorn runs on it by default), so
that machinery costs less with no change to any component: on the pod bench the way down (mostly
I/O) cost 18 to 19 % less CPU per pod, the way up (mostly the interpreter) the same; bench/README.md.

``auto`` (the default) uses uvloop where it is installed and the standard loop otherwise, so a
platform without a uvloop wheel still runs; ``asyncio`` and ``uvloop`` force one (``uvloop``
where it is missing is a start-up error, not a silent fallback).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar, get_args

from vkprovider import gcpolicy

T = TypeVar("T")

EventLoopChoice = Literal["auto", "asyncio", "uvloop"]
#: the choices, for command-line flags
CHOICES: tuple[str, ...] = get_args(EventLoopChoice)


def uvloop_available() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(choice: EventLoopChoice) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for ``asyncio.Runner``; ``None`` means the standard loop."""
    if choice == "asyncio" or (choice == "auto" and not uvloop_available()):
        return None
    try:
        import uvloop
    except ImportError as exc:
        raise RuntimeError("event_loop: uvloop is not installed (pip install uvloop, or set auto)") from exc
    new_event_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "auto") -> T:
    """``asyncio.run`` on the chosen loop (same shutdown: tasks cancelled, async generators and
    the default executor closed), with the collector settled for a long run (``gcpolicy``)."""
    gcpolicy.settle_after_start_up()
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)


def running_loop_name() -> str:
    """``uvloop`` or ``asyncio``, for the start-up log line and the benches' reports."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
