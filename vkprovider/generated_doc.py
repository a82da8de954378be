"""Write a generated doc page, or check that the committed one is current.

The plugin API reference and the configuration reference are both rendered from code; one
command line (``[PATH]`` to write, ``--check [PATH]`` to compare) serves both, so ``make docs``
and their drift tests behave the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(render: Callable[[], str], default: Path, argv: list[str] | None = None) -> int:
    """Exit status 1 (with a message) when ``--check`` finds the file out of date, else 0."""
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args and args[0] == "--check":
        path = Path(args[1]) if len(args) > 1 else default
        if path.read_text() != text:
            print(f"{path} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    (Path(args[0]) if args else default).write_text(text)
    return 0
