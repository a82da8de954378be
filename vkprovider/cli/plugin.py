"""``vkprovider plugin serve``: run any in-process adapter as an out-of-process gRPC plugin;
``vkprovider plugin new``: write a new adapter package (``plugin_new.py``).

Prints the handshake line (``vkprovider-plugin|1|<address>``) on stdout once serving, so the
service's plugin supervisor (or a human) knows where to connect; logs go to stderr. SIGTERM or
SIGINT stops it gracefully (NOT_SERVING, drain in-flight calls, close the adapter). When launched
by a host (``VKPROVIDER_PLUGIN_ADDRESS`` set) it also stops if that host dies without stopping
it, so a crashed service never leaves plugins behind.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from vkprovider import eventloop
from vkprovider.cli.plugin_new import generate
from vkprovider.config import load_settings
from vkprovider.errors import ConfigError
from vkprovider.plugins.grpc.handshake import ADDRESS_ENV, format_handshake
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.registry import instantiate


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("plugin", help="run provider adapters as out-of-process gRPC plugins")
    sub = parser.add_subparsers(dest="plugin_command", required=True, metavar="SUBCOMMAND")
    serve = sub.add_parser("serve", help="serve an adapter over gRPC and print the handshake line")
    serve.add_argument("adapter", help="entry-point name (e.g. fakecloud) or module:Class")
    serve.add_argument(
        "--config",
        type=Path,
        help="YAML: the adapter's settings mapping, or a service config whose providers list has it",
    )
    serve.add_argument("--name", help="provider instance name (default: the adapter name)")
    serve.add_argument(
        "--address",
        help=f"unix:/path or 127.0.0.1:PORT (default: ${ADDRESS_ENV} or 127.0.0.1:0, a free port)",
    )
    serve.add_argument("--grace", type=float, default=5.0, help="seconds to drain calls on SIGTERM")
    serve.set_defaults(handler=_serve)
    new = sub.add_parser("new", help="write a new adapter package that passes the contract suite")
    new.add_argument("name", help="adapter name, lower case with dashes (e.g. acme-gpu)")
    new.add_argument("--out", type=Path, help="directory to create (default: ./vkprovider-NAME)")
    new.set_defaults(handler=_new)


def _new(args: argparse.Namespace) -> int:
    out: Path = args.out or Path(f"vkprovider-{args.name}")
    generate(args.name, out)
    print(f"wrote {out}/: cd {out} && pip install -e '.[test]' && pytest")
    return 0


def _settings_for(adapter: str, name: str | None, path: Path | None) -> tuple[str, dict[str, Any]]:
    """(instance name, settings) from ``--config``: a settings mapping or a full service config."""
    default_name = name or adapter.rpartition(":")[2].lower().replace("_", "-")
    if path is None:
        return default_name, {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read plugin config {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"plugin config {path}: top level must be a mapping")
    if "providers" not in data:
        return default_name, data
    candidates = [
        p for p in load_settings(path).providers if (p.name == name if name else p.adapter == adapter)
    ]
    if len(candidates) != 1:
        hint = ""
        if len(candidates) > 1:
            names = ", ".join(p.name for p in candidates)
            hint = f" ({names}): pick one with --name, e.g. --name {candidates[0].name}"
        raise ConfigError(
            f"{path}: expected exactly one provider for {name or adapter!r}, found {len(candidates)}{hint}"
        )
    return candidates[0].name, candidates[0].settings


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    name, settings = _settings_for(args.adapter, args.name, args.config)
    provider = instantiate(args.adapter, name, settings)
    address = args.address or os.environ.get(ADDRESS_ENV) or "127.0.0.1:0"
    return eventloop.run(_run(provider, address, args.grace))


async def _stop_when_orphaned(parent: int, stop: asyncio.Event) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    logging.getLogger(__name__).warning("host process %d is gone; stopping", parent)
    stop.set()


async def _run(provider: Any, address: str, grace: float) -> int:
    server = await serve_adapter(provider, address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = None
    if os.environ.get(ADDRESS_ENV):
        watcher = asyncio.create_task(_stop_when_orphaned(os.getppid(), stop))
    print(format_handshake(server.address), flush=True)
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
    await server.stop(grace)
    await provider.close()
    return 0
