"""The shipped Grafana dashboard against a real Prometheus scraping the real service.

``vkprovider serve`` runs in-process against the session cluster with two fakecloud providers
(the cheaper one refuses its first create, so there is a failover and a provider error), places
a few pods (one asks for more GPUs than any offer has, so it stays unplaced), and Debian's
Prometheus scrapes its admin ``/metrics`` every second. Then every ``expr`` of every panel in
``deploy/grafana/vkprovider.json`` (template variables substituted as Grafana would with "All")
must return at least one series through ``/api/v1/query``, and every template variable must
have values: a query that returns nothing fails the test, named with its panel.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.service_support import Running, running_service
from tests.support import bound_gpu_pod, eventually
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.prometheus import binary, start_prometheus
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import cloud_config

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(binary() is None, reason="prometheus not installed: run `make prometheus`"),
]

JSON = dict[str, Any]
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "vkprovider.json"
#: Grafana's built-in interval variables: a window covering the whole test, so every event counts
BUILTINS = {"__rate_interval": "5m", "__interval": "5s", "__range": "5m"}


def dashboard_queries(dashboard: JSON) -> Iterator[tuple[str, str]]:
    """(panel title, expr) of every target of every panel, nested rows included."""

    def walk(panels: list[JSON]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    yield panel.get("title", "?"), target["expr"]
            yield from walk(panel.get("panels") or [])

    yield from walk(dashboard.get("panels") or [])


def substitute(expr: str, variables: list[str]) -> str:
    """Grafana's substitution with every variable at "All" (its allValue ``.*``)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in BUILTINS:
            return BUILTINS[name]
        assert name in variables, f"{expr}: unknown variable ${name}"
        return ".*"

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


def settings(cluster: Cluster, node: str, clouds: dict[str, Any]) -> Settings:
    return Settings.model_validate(
        {
            "node": {"name": node, "lease_renew_seconds": 1, "status_update_seconds": 2, "probe_seconds": 1},
            "kube": {"kubeconfig": str(cluster.kubeconfig)},
            "pods": {"status_poll_seconds": 0.5, "drain_timeout_seconds": 2},
            "http": {"admin_port": 0},
            "providers": [
                {"name": name, "adapter": "fakecloud", "settings": {"url": cloud.url}}
                for name, cloud in clouds.items()
            ],
            "placement": {"offer_refresh_seconds": 1, "blocklist_ttl_seconds": 600},
            # the gate reads a pool of one GPU-less node (0 free GPUs) and, in dry-run, writes nothing
            "gate": {
                "signal": {"kind": "kube", "kube": {"node_selector": f"pool=local-{node}"}},
                "interval_seconds": 1,
                "dry_run": True,
            },
        }
    )


@contextlib.asynccontextmanager
async def serving(cluster: Cluster, kube: KubeClient) -> AsyncIterator[Running]:
    """The service over clouds ``cheap`` (1.0/h) and ``backup`` (2.5/h), its gate reading a
    GPU-less local pool of one node made for it (deleted afterwards)."""
    node = f"vk-{uuid.uuid4().hex[:8]}"
    local = {"metadata": {"name": f"local-{node}", "labels": {"pool": f"local-{node}"}}}
    await kube.request("POST", "/api/v1/nodes", body=local)  # no kubelet: never Ready, no GPUs
    clouds = {"cheap": cloud_config("cheap", 1.0), "backup": cloud_config("backup", 2.5)}
    try:
        async with running_service(cluster, clouds, settings=settings, node=node) as svc:
            yield svc
    finally:
        with contextlib.suppress(Exception):
            await kube.request("DELETE", f"/api/v1/nodes/local-{node}")


async def query(prom: httpx.AsyncClient, expr: str) -> list[JSON]:
    response = await prom.get("/api/v1/query", params={"query": expr})
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
    result: list[JSON] = body["data"]["result"]
    return result


async def test_every_dashboard_query_returns_data_from_the_running_service(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    queries = [(title, substitute(expr, variables)) for title, expr in dashboard_queries(dashboard)]
    assert len(queries) >= 20, queries

    kube = await KubeClient.connect(str(cluster.kubeconfig))
    try:
        async with serving(cluster, kube) as svc:
            assert svc.service.admin is not None
            target = f"127.0.0.1:{svc.service.admin.port}"
            prom_proc, url = await start_prometheus(tmp_path / "prom", [target], interval_seconds=1)
            try:
                async with httpx.AsyncClient(base_url=url, timeout=10) as prom:

                    async def scraped() -> bool:
                        up = await query(prom, "up")
                        return any(r["value"][1] == "1" for r in up)

                    await eventually(scraped, timeout=60)  # scraping before anything happens
                    await place_pods(kube, namespace, svc.node, svc.clouds["cheap"].url)
                    await check_dashboard(prom, queries)
                    await check_variables(prom, dashboard)
                    await settled(lambda: check_figures(prom, namespace))
            finally:
                prom_proc.stop()
    finally:
        await kube.close()


async def place_pods(kube: KubeClient, namespace: str, node: str, cheap_url: str) -> None:
    """Three pods run (the cheap cloud refuses its first create: a failover); one stays unplaced."""
    async with httpx.AsyncClient(base_url=cheap_url) as cheap:
        rule = {"method": "POST", "path": "/v1/deployments", "status": 409, "message": "sold out"}
        (await cheap.post("/admin/rules", json={**rule, "times": 1})).raise_for_status()
    names = ["a", "b", "c"]
    for name in names:
        await kube.request(
            "POST", f"/api/v1/namespaces/{namespace}/pods", body=bound_gpu_pod(name, node, grace_seconds=1)
        )
    await kube.request(  # no offer has 8 GPUs: it stays Pending, unplaced
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        body=bound_gpu_pod("too-big", node, gpus=8, grace_seconds=1),
    )

    async def running() -> bool:
        body = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in body["items"]}
        return all(phases.get(n) == "Running" for n in names)

    await eventually(running, timeout=90)


def has_value(result: list[JSON]) -> bool:
    """At least one series with a number (a NaN quantile, from a zero rate, shows nothing)."""
    return any(r["value"][1] not in ("NaN", "+Inf", "-Inf") for r in result)


async def check_dashboard(prom: httpx.AsyncClient, queries: list[tuple[str, str]]) -> None:
    pending = dict.fromkeys(f"{title}: {expr}" for title, expr in queries)
    answered: dict[str, list[JSON]] = {}

    async def all_answer() -> bool:
        for key in list(pending):
            result = await query(prom, key.split(": ", 1)[1])
            if has_value(result):
                answered[key] = result
                del pending[key]
        return not pending

    with contextlib.suppress(TimeoutError):
        await eventually(all_answer, timeout=60, interval=1)
    assert not pending, "dashboard queries without data:\n" + "\n".join(pending)
    print("\ndashboard queries (series, first value):")
    for key, result in answered.items():
        print(f"  {len(result):3d} {result[0]['value'][1]:>12.12}  {key}")


async def check_variables(prom: httpx.AsyncClient, dashboard: JSON) -> None:
    for var in dashboard["templating"]["list"]:  # label_values(metric, label)
        found = re.fullmatch(r"label_values\((\w+), *(\w+)\)", var["query"]["query"])
        assert found is not None, var["query"]
        metric, label = found.groups()
        response = await prom.get(f"/api/v1/label/{label}/values", params={"match[]": metric})
        assert response.json()["data"], f"variable {var['name']}: no values"


async def settled(check: Callable[[], Awaitable[None]], timeout: float = 30) -> None:
    """``check`` passes once the last scrape caught up (it may be a second behind the API)."""

    async def passes() -> bool:
        try:
            await check()
        except AssertionError:
            return False
        return True

    with contextlib.suppress(TimeoutError):
        await eventually(passes, timeout=timeout, interval=1)
    await check()  # passes now, or fails with its message


async def check_figures(prom: httpx.AsyncClient, namespace: str) -> None:
    """The figures follow what happened, not only that something exists."""
    pods = await query(prom, "sum by (provider, phase) (vkprovider_pods)")
    by = {(r["metric"]["provider"], r["metric"]["phase"]): float(r["value"][1]) for r in pods}
    assert by[("none", "Pending")] == 1, by
    assert sum(v for (_, phase), v in by.items() if phase == "Running") == 3, by
    # The event metrics are process-wide, and a pytest worker runs other files' in-process
    # providers too: ask about this service's two providers only.
    errors = await query(
        prom,
        'vkprovider_provider_call_errors_total{call="deploy", error="NoCapacity", provider=~"cheap|backup"} > 0',
    )
    assert {r["metric"]["provider"] for r in errors} == {"cheap"}, errors
    spend = await query(prom, f'sum(vkprovider_spend_per_hour{{namespace="{namespace}"}})')
    price = {"cheap": 1.0, "backup": 2.5}
    billed = sum(price[p] * v for (p, _), v in by.items() if p in price)
    assert float(spend[0]["value"][1]) == pytest.approx(billed), (spend, by)
    placed = await query(prom, 'sum(vkprovider_placement_seconds_count{outcome="placed"})')
    assert float(placed[0]["value"][1]) >= 3, placed
