"""``vkprovider fakecloud``: run a simulated GPU cloud (see docs/fakecloud.md).

Prints ``fakecloud listening on http://127.0.0.1:PORT`` once serving (``--port 0`` picks a free
port), so scripts and tests can read the address. The server module is imported lazily: the
service itself never needs FastAPI's fakecloud app loaded.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from vkprovider.errors import ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("fakecloud", help="run a simulated GPU cloud (HTTP) for tests and demos")
    parser.add_argument(
        "--config", type=Path, required=True, help="fakecloud YAML (catalog, lifecycle, knobs)"
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port on --host; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    server: Any = importlib.import_module("vkprovider_fakecloud.server")
    config_module: Any = importlib.import_module("vkprovider_fakecloud.config")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port: {args.port} is not a TCP port")
    try:
        config = server.load_config(args.config)
    except config_module.FakeCloudConfigError as exc:
        raise ConfigError(str(exc)) from None
    try:
        server.serve(config, host=args.host, port=args.port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    return 0
