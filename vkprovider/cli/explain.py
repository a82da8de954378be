"""``vkprovider explain -f pod.yaml --config FILE``: where would this pod go? (dry run)

Builds the configured providers, fetches their live offers once, translates the pod and prints
the ranked candidate table ``Placer.rank`` produces, with every filtered-out offer and why.
Nothing is deployed. Placement only needs the pod's resources and annotations, so env,
volumes and pull secrets are dropped before translation (``vkprovider.http.explain``, shared with
the admin endpoint): a dry run needs no cluster access.

With ``--admin URL`` (repeatable, one per replica), or without ``--config`` (then the admin API
at ``http://127.0.0.1:10255``, as ``vkprovider status`` asks), the running service answers
instead, from its own live catalog (``POST /explain?refresh=true`` on the leader; token flags as
for ``vkprovider status``, :mod:`vkprovider.cli.admin_client`; the token's user needs ``create``
on ``nodes/<node>/proxy``): the providers' addresses, keys and ports are the service's business,
so ``vkprovider explain -f pod.yaml`` works next to ``make demo`` without knowing them. With
several virtual nodes ``--node-name`` picks the node whose placement view answers (its
providers and their health; ``?node=``), else the first node's.

Exit codes: 0 a provider would take the pod, 1 no provider would (or the admin API did not
answer or refused), 2 bad input or config, 3 only standby replicas answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from vkprovider.cli import admin_client
from vkprovider.cli.admin_client import AdminApiError
from vkprovider.errors import ConfigError, InvalidRequest
from vkprovider.http.explain import check_pod, pod_request_context
from vkprovider.placement import Decision, PlacementConfig, Placer
from vkprovider.placement.explain import decision_dict, render_table
from vkprovider.placement.types import PlacementTarget


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("explain", help="dry-run placement: rank providers' live offers for a pod")
    parser.add_argument("-f", "--filename", required=True, help="pod manifest (YAML or JSON; '-' for stdin)")
    parser.add_argument(
        "--config",
        help="service config file: build its providers here (without it, and without --admin: "
        "ask the running service's admin API)",
    )
    parser.add_argument(
        "--node-name",
        default=None,
        help="virtual node name (default: from config; against the admin API: its first node)",
    )
    parser.add_argument("--json", action="store_true", help="print the decision as JSON instead of a table")
    parser.add_argument("--max-rejections", type=int, default=50, help="filtered-out offers to list")
    admin_client.add_arguments(parser, config=False)
    parser.set_defaults(handler=run)


def load_pod(path: str) -> dict[str, Any]:
    """Read and sanity-check a pod manifest; ``InvalidRequest`` names the problem."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise InvalidRequest(f"cannot read pod file {path}: {exc.strerror or exc}") from None
    try:
        pod = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidRequest(f"pod file {path} is not valid YAML: {_yaml_problem(exc)}") from None
    return check_pod(pod, path)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: the problem and where, without PyYAML's multi-line snippet."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())


async def explain(
    pod: Mapping[str, Any],
    providers: Mapping[str, PlacementTarget],
    placer_config: PlacementConfig,
    node_name: str,
) -> tuple[Decision, dict[str, str]]:
    """Refresh offers once, rank the pod with per-offer reasons; also return refresh errors."""
    request, ctx = await pod_request_context(pod, node_name)  # input errors surface before any I/O
    placer = Placer(providers, placer_config)
    await placer.refresh()
    errors = {n: c.error for n, c in placer.catalog.providers.items() if c.error}
    return placer.rank(request, ctx, detail=True), errors


async def _run(args: argparse.Namespace) -> int:
    from vkprovider.config import load_settings
    from vkprovider.plugins.registry import build_providers

    pod = load_pod(args.filename)
    settings = load_settings(args.config)
    if not settings.providers:
        raise ConfigError(f"{args.config or 'environment'}: providers: no providers configured")
    node_name = args.node_name or settings.node.name
    providers = build_providers(settings.providers)
    try:
        decision, errors = await explain(pod, providers, settings.placement, node_name)
    finally:
        await asyncio.gather(*(p.close() for p in providers.values()), return_exceptions=True)
    if args.json:
        print(json.dumps(decision_dict(decision) | {"refresh_errors": errors}, indent=2))
    else:
        print(_with_pod_name(render_table(decision, max_rejections=args.max_rejections), decision, pod))
        for name, error in sorted(errors.items()):
            print(f"offers from {name} unavailable: {error}")
    return 0 if decision.candidates else 1


def pod_label(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` of the manifest (a dry run's UID is a placeholder, not a name)."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or '(unnamed)'}"


def _with_pod_name(table: str, decision: Decision, pod: Mapping[str, Any]) -> str:
    heading, sep, rest = table.partition("\n")
    heading = heading.replace(f"decision for pod {decision.uid}", f"decision for pod {pod_label(pod)}", 1)
    return heading + sep + rest


def _run_remote(args: argparse.Namespace) -> int:
    """Ask the running leader (its live catalog) instead of building the providers here."""
    pod = load_pod(args.filename)
    try:
        creds = admin_client.credentials(args)
        view = admin_client.leader_state(admin_client.admin_urls(args), creds, args.timeout)
        # --node-name: that virtual node's placement view (several nodes: nodes:), else the first
        node = f"&node={quote(args.node_name, safe='')}" if args.node_name else ""
        answer = admin_client.request(
            view.url, "POST", f"/explain?refresh=true{node}", creds, args.timeout, body=pod
        )
    except AdminApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    decision = answer.get("decision") or {}
    if args.json:
        print(json.dumps(decision, indent=2))
    else:
        print(
            str(answer.get("table", "")).replace(
                f"decision for pod {decision.get('uid')}", f"decision for pod {pod_label(pod)}", 1
            )
        )
    return 0 if decision.get("candidates") else 1


def run(args: argparse.Namespace) -> int:
    if args.admin or not args.config:
        return _run_remote(args)
    from vkprovider import logs

    logs.configure("ERROR")  # provider failures are part of the output below, not log noise
    # A plugin's start failures (and its stderr) are the "offers from X unavailable" lines: logged
    # too, they came out once more, on stderr, after the table.
    logging.getLogger("vkprovider.plugins.grpc.supervisor").setLevel(logging.CRITICAL)
    return asyncio.run(_run(args))
