"""``vkprovider uninstall-check --config FILE``: is anything this node placed still running (billing)?

Uninstalling vkprovider deletes nothing it placed: external deployments outlive it and keep
billing. This check cannot pass while anything runs, because it asks the source of truth, not
only the service:

1. **every configured provider, directly** — through the same adapters the service uses, each
   lists the deployments labelled for the node (``Provider.list(node_name)``). Every deployment
   listed, whatever its phase, counts (a stopped deployment may still bill for its disk); a
   provider that cannot be asked (unreachable, no key) fails the check, since then nobody knows;
2. **the leader's** ``/state`` — pods bound to the node and deployments it tracks. A standby's
   answer does not count (it holds no term); only standbys answering fails the check, naming the
   leader. ``--providers-only`` skips this once the service is gone (after ``kubectl delete``).

Run it where the config and the provider keys are: inside the leader's pod before deleting
(``kubectl exec``), or from a workstation with the overlay's ``config.yaml`` and the keys in the
environment after. Exit 0: nothing runs; 1: something still runs or could not be asked
(each listed); 2: bad config.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vkprovider.cli import admin_client
from vkprovider.cli.admin_client import AdminApiError
from vkprovider.errors import ConfigError
from vkprovider.plugins.api import DeploymentStatus, Provider


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "uninstall-check",
        help="list what this node placed that still runs at its providers (exit 0 only when nothing does)",
    )
    parser.add_argument("--config", required=True, help="service config file (providers and node name)")
    parser.add_argument("--node-name", default=None, help="virtual node name (default: from config)")
    parser.add_argument(
        "--providers-only",
        action="store_true",
        help="do not ask the service's admin API (it is uninstalled already)",
    )
    parser.add_argument(
        "--provider-timeout", type=float, default=60.0, help="seconds to wait for each provider's list"
    )
    admin_client.add_arguments(parser, config=False)
    parser.set_defaults(handler=run)


@dataclass
class Findings:
    running: list[str] = field(default_factory=list)  # what still runs, one line each
    unknown: list[str] = field(default_factory=list)  # what could not be asked, and why
    clean: list[str] = field(default_factory=list)  # what was asked and holds nothing

    @property
    def passed(self) -> bool:
        return not self.running and not self.unknown


def _describe(provider: str, d: DeploymentStatus) -> str:
    money = f", {d.price_per_hour:g}/h" if d.price_per_hour is not None else ""
    ident = f" ({d.provider_id})" if d.provider_id and d.provider_id != d.uid else ""
    return f"provider {provider}: deployment of pod uid {d.uid}{ident}, {d.phase.value}{money}"


async def ask_providers(
    providers: Mapping[str, Provider], node: str, timeout: float, findings: Findings
) -> None:
    async def one(name: str, provider: Provider) -> None:
        try:
            listed = await asyncio.wait_for(provider.list(node), timeout)
        except TimeoutError:
            findings.unknown.append(f"provider {name}: no answer to list within {timeout:g}s")
            return
        except Exception as exc:  # any failure means "unknown": reported, never hidden
            findings.unknown.append(f"provider {name}: could not list its deployments: {exc}")
            return
        if listed:
            findings.running.extend(_describe(name, d) for d in sorted(listed, key=lambda d: d.uid))
        else:
            findings.clean.append(f"provider {name}: no deployment labelled for node {node}")

    await asyncio.gather(*(one(name, p) for name, p in sorted(providers.items())))


def ask_service(args: argparse.Namespace, findings: Findings) -> None:
    try:
        creds = admin_client.credentials(args)
        view = admin_client.leader_state(admin_client.admin_urls(args), creds, args.timeout)
    except AdminApiError as exc:
        findings.unknown.append(f"service: {exc.message} (--providers-only once it is uninstalled)")
        return
    for state in view.state.get("nodes") or [view.state]:  # each virtual node (``nodes:``)
        node = state.get("node")
        if state.get("role") == "standby":  # no replica that answered leads it: its counts are unknown
            findings.unknown.append(
                f"service: node {node}: only standbys answered (leader {state.get('leader')})"
            )
            continue
        pods, deployments = int(state.get("pods") or 0), int(state.get("deployments") or 0)
        if pods or deployments:
            findings.running.append(
                f"service (leader at {view.url}): {pods} pods bound to node {node}, "
                f"{deployments} deployments tracked"
            )
        else:
            findings.clean.append(f"service (leader at {view.url}): 0 pods, 0 deployments")


async def check(args: argparse.Namespace) -> Findings:
    from vkprovider.config import load_settings
    from vkprovider.plugins.registry import build_providers

    settings = load_settings(args.config)
    if not settings.providers:
        raise ConfigError(f"{args.config}: providers: no providers configured, nothing to check")
    node = args.node_name or settings.node.name
    findings = Findings()
    if not args.providers_only:  # --admin, else the config's http section
        await asyncio.to_thread(ask_service, args, findings)
    providers = build_providers(settings.providers)
    try:
        await ask_providers(providers, node, args.provider_timeout, findings)
    finally:
        await asyncio.gather(*(p.close() for p in providers.values()), return_exceptions=True)
    return findings


def run(args: argparse.Namespace) -> int:
    from vkprovider import logs

    logs.configure("ERROR")  # failures are the findings below, not log noise
    findings = asyncio.run(check(args))
    for line in findings.clean:
        print(f"ok       {line}")
    for line in findings.running:
        print(f"RUNNING  {line}")
    for line in findings.unknown:
        print(f"UNKNOWN  {line}")
    if findings.passed:
        print("nothing placed by this node runs at any configured provider: safe to uninstall")
        return 0
    print(
        f"not safe to uninstall: {len(findings.running)} still running, {len(findings.unknown)} not known "
        "(drain the node with vkprovider running; docs/deploy.md, Uninstall)",
        file=sys.stderr,
    )
    return 1
