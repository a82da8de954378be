"""``vkprovider serve --config FILE``: run the virtual node (see vkprovider.service)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from vkprovider import logs
from vkprovider.config import load_settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("serve", help="register the virtual node and run its pods on providers")
    parser.add_argument(
        "--config", type=Path, help="YAML config; VKPROVIDER_* environment variables override it"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    logs.configure(settings.log_level, json_lines=settings.log_json)
    from vkprovider.service import Service  # heavy imports only for this command

    async def main() -> None:
        service = Service(settings)
        service.install_signal_handlers()
        await service.run()

    asyncio.run(main())
    return 0
