"""The ``vkprovider`` command: one module per subcommand, each exposing ``register(subparsers)``.

A subcommand's handler returns an exit code. Expected failures (bad config, bad input) raise
``VkProviderError`` and are printed as one clear ``error: ...`` line, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from vkprovider.errors import VkProviderError

#: Subcommand modules under ``vkprovider.cli``; add a module here to add a subcommand.
COMMAND_MODULES: tuple[str, ...] = (
    "serve",
    "status",
    "plugin",
    "fakecloud",
    "explain",
    "gate",
    "quota",
    "uninstall_check",
    "approve_csr",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vkprovider", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(f"vkprovider.cli.{module_name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except VkProviderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
