"""``vkprovider status``: what the running service knows, as tables (or ``--json``).

Reads ``GET /state`` from the admin API (``--admin URL``, repeatable for each replica, or the
``http`` section of ``--config FILE``; default ``http://127.0.0.1:10255``), with a bearer token
(``--token``, ``--token-file``, else the pod's ServiceAccount token when mounted:
:mod:`vkprovider.cli.admin_client`). Only the leader's answer is shown: a standby says it is one
and who leads. Nothing here talks to a provider or the Kubernetes API, so it works during an
outage: providers with health, breaker and catalog age; pods per provider; spend per provider and
namespace (money per hour, after discounts); blocklist entries with their expiry; the queue. With
several virtual nodes, each node's tables in turn, from the replica that leads it.

Exit codes: 0 shown, 1 the admin API did not answer or refused, 2 bad config or token file,
3 only standby replicas answered (the message names the leader).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from vkprovider.cli import admin_client
from vkprovider.cli.admin_client import AdminApiError

JSON = dict[str, Any]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("status", help="the running service's providers, pods, spend and queue")
    admin_client.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the raw state as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        creds = admin_client.credentials(args)
        view = admin_client.leader_state(admin_client.admin_urls(args), creds, args.timeout)
    except AdminApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    for url, leader in view.standbys.items():
        print(f"{url}: a standby (the leader is {leader or 'not known yet'})", file=sys.stderr)
    for url, why in view.failures.items():
        print(f"{url}: {why}", file=sys.stderr)
    state = view.state
    if args.json:
        print(json.dumps(state, indent=2, sort_keys=True))
        return 0
    render(state, Console())
    return 0


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}/h"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def render(state: JSON, console: Console) -> None:
    """One node's tables; with several virtual nodes, each node's in turn."""
    for node in state.get("nodes") or [state]:
        if node.get("role") == "standby":  # no replica that answered leads it
            console.print(
                f"node [bold]{node.get('node')}[/] (standby: the leader is {node.get('leader') or 'not known yet'})"
            )
        else:
            render_node(node, console)


def render_node(state: JSON, console: Console) -> None:
    breaker = "[bold red]OPEN[/] (no new placements)" if state.get("breaker_open") else "closed"
    queue = state.get("queue") or {}
    console.print(
        f"node [bold]{state.get('node')}[/] ({state.get('role') or 'leader'})  breaker {breaker}  pods {state.get('pods')}  "
        f"deployments {state.get('deployments')}  queue {queue.get('waiting', 0)} waiting / "
        f"{queue.get('busy', 0)} busy / {queue.get('unplaced_pods', 0)} unplaced  "
        f"orphans deleted {state.get('orphans_deleted', 0)}"
    )
    # An older service has no "providers" view: its placement summary still has their health.
    console.print(
        providers_table(state.get("providers") or (state.get("placement") or {}).get("providers") or {})
    )
    console.print(spend_table(state.get("spend") or [], (state.get("placement") or {}).get("budgets") or {}))
    console.print(blocklist_table(state.get("blocklist") or []))


def providers_table(providers: dict[str, JSON]) -> Table:
    table = Table(title="providers")
    for column in ("provider", "health", "catalog", "offers", "free GPUs", "pods", "spend", "last error"):
        table.add_column(column, justify="right" if column in ("offers", "free GPUs", "spend") else "left")
    for name, p in providers.items():
        if p.get("disabled"):
            health = f"[red]disabled[/] {p.get('disabled_reason', '')}"
        elif p.get("reachable", True):
            health = "[green]reachable[/]"
        else:
            health = "[red]unreachable[/]"
        rate = p.get("failure_rate") or 0
        if rate:
            health += f" ({rate:.0%} failing)"
        catalog = _age(p.get("catalog_age_seconds")) + (" [yellow]stale[/]" if p.get("catalog_stale") else "")
        pods = ", ".join(f"{phase} {n}" for phase, n in (p.get("pods") or {}).items()) or "-"
        table.add_row(
            name,
            health,
            catalog,
            str(p.get("offers", 0)),
            str(p.get("free_gpus", 0)),
            pods,
            _money(p.get("spend_per_hour")),
            str(p.get("last_error") or p.get("catalog_error") or ""),
        )
    return table


def spend_table(rows: list[JSON], budgets: dict[str, JSON]) -> Table:
    table = Table(title="spend (after discounts)")
    for column in ("provider", "namespace", "pods", "spend", "namespace total", "namespace cap"):
        table.add_column(column, justify="left" if column in ("provider", "namespace") else "right")
    for row in rows:
        budget = budgets.get(row["namespace"]) or {}
        table.add_row(
            row["provider"],
            row["namespace"],
            str(row["pods"]),
            _money(row["per_hour"]),
            _money(budget.get("spent")),
            _money(row.get("namespace_cap")) if row.get("namespace_cap") is not None else "none",
        )
    return table


def blocklist_table(entries: list[JSON]) -> Table:
    table = Table(title="blocklist")
    for column in ("provider", "GPU type", "region", "expires in", "reason"):
        table.add_column(column)
    for e in entries:
        table.add_row(
            e["provider"], e["gpu_type"], e["region"] or "-", _age(e["expires_in_seconds"]), e["reason"]
        )
    return table
