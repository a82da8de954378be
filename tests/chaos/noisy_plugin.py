"""The chaos run's gRPC plugin: ``vkprovider plugin serve`` that spews garbage when told to.

Run as a script, ``python noisy_plugin.py plugin serve fakecloud --config FILE ...`` (a plugin
gets no ``PYTHONPATH``, so it must not import ``tests``); its command line still reads
``plugin serve``, which is how the rig finds a replica's plugin processes. It serves exactly as
``python -m vkprovider`` would, and:

* on SIGUSR1 it writes :func:`noise` to stdout and stderr from a thread while it keeps serving;
* if ``FILE.noise`` exists when it starts, it writes the same noise *before* its handshake.

The noise is what issue 22 defect 2 is about: 1 MiB lines, random binary (newlines at random
places), control characters and terminal escapes, and a long run with no newline at all.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from vkprovider.cli import main

MIB = 1 << 20


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def noise() -> None:
    for fd in (1, 2):
        _write_all(fd, b"x" * MIB + b"\n")
        _write_all(fd, os.urandom(256 * 1024))
        _write_all(fd, bytes(range(256)) * 1024 + b"\n")
        _write_all(fd, b"\x1b[2J\x00 no newline " * (MIB // 16))
        _write_all(fd, b"\n")


def _on_usr1(signum: int, frame: FrameType | None) -> None:
    threading.Thread(target=noise, name="noise", daemon=True).start()


def marker(argv: list[str]) -> Path | None:
    """``<config>.noise``: present while the chaos fault wants noise before the handshake."""
    if "--config" in argv and argv.index("--config") + 1 < len(argv):
        config = Path(argv[argv.index("--config") + 1])
        return config.with_name(config.name + ".noise")
    return None


if __name__ == "__main__":
    args = sys.argv[1:]
    signal.signal(signal.SIGUSR1, _on_usr1)
    before = marker(args)
    if before is not None and before.exists():
        noise()
    raise SystemExit(main(args))
