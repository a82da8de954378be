"""``vkprovider serve --config FILE``: run the virtual node (see vkprovider.service).

Before anything connects, the config passes the start-up checks of :mod:`vkprovider.preflight`
(kubeconfig, ports, providers and their adapters' settings) in one validation pass; a bad config
exits with code 2 and one message naming every bad field.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vkprovider import eventloop, logs
from vkprovider.config import load_settings
from vkprovider.errors import ConfigError
from vkprovider.preflight import StartupChecks


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("serve", help="register the virtual node and run its pods on providers")
    parser.add_argument(
        "--config", type=Path, help="YAML config; VKPROVIDER_* environment variables override it"
    )
    parser.set_defaults(handler=_run)


def adapter_settings_problems(
    index: int, name: str, adapter: str, settings: dict[str, Any]
) -> list[tuple[str, str]]:
    """Validate an in-process provider's ``settings`` with its adapter's own model, so a typo
    stops start-up with the field named instead of surfacing at the first deploy."""
    from vkprovider.plugins.registry import load_adapter  # heavy (gRPC); serve needs it anyway

    try:
        adapter_cls = load_adapter(adapter, where="adapter")
    except ConfigError as exc:
        return [("adapter", str(exc).removeprefix("adapter: "))]
    try:
        adapter_cls.Settings.model_validate(settings)
    except ValidationError as exc:
        return [
            (".".join(["settings", *(str(p) for p in err["loc"])]), err["msg"].removeprefix("Value error, "))
            for err in exc.errors()
        ]
    return []


def _run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config, checks=StartupChecks(provider_settings=adapter_settings_problems))
    logs.configure(settings.log_level, json_lines=settings.log_json)
    from vkprovider.service import Service  # heavy imports only for this command

    async def main() -> None:
        logging.getLogger("vkprovider.serve").info("event loop: %s", eventloop.running_loop_name())
        service = Service(settings)
        service.install_signal_handlers()
        await service.run()

    eventloop.run(main(), settings.event_loop)
    return 0
