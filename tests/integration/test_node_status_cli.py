"""``vkprovider status`` against a running service (real control plane, real fakeclouds): the
tables and ``--json`` show providers, pods per provider, spend, the blocklist and the queue."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from tests.integration.service_support import running_pods, running_service
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.sim.local import cloud_config, inference_deployment

pytestmark = pytest.mark.cluster


async def status(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a thread: the service answering it runs on this event loop."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "vkprovider", "status", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


async def test_status_shows_providers_pods_spend_blocklist_and_queue(
    cluster: Cluster, namespace: str
) -> None:
    clouds = {
        "cheap": cloud_config("cheap", 1.0, capacity=4),
        "premium": cloud_config("premium", 3.0, capacity=4),
    }
    # A blocklist entry that outlives the test however loaded the machine is (the TTL is shown).
    async with running_service(cluster, clouds, blocklist_ttl_seconds=600) as svc:
        async with httpx.AsyncClient(base_url=svc.clouds["cheap"].url) as client:  # one sold-out answer
            rule = {
                "method": "POST",
                "path": "/v1/deployments",
                "status": 409,
                "message": "sold out",
                "times": 1,
            }
            (await client.post("/admin/rules", json=rule)).raise_for_status()
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
        await svc.kube.request("POST", path, body=inference_deployment("web", svc.node, 3))
        await running_pods(svc, namespace, 3)
        assert svc.service.admin is not None
        admin = f"http://127.0.0.1:{svc.service.admin.port}"

        async def all_tracked() -> bool:
            async with httpx.AsyncClient() as client:
                state = (await client.get(f"{admin}/state")).json()
            return sum(sum(p["pods"].values()) for p in state["providers"].values()) == 3

        await eventually(all_tracked, timeout=30)
        result = await status("--admin", admin, "--json")
        assert result.returncode == 0, result.stderr
        state = json.loads(result.stdout)
        # The first create on cheap was refused (so cheap/H100 is blocklisted) and went to
        # premium; how many of the others beat the blocklist to cheap depends on timing.
        providers = state["providers"]
        assert providers["cheap"]["reachable"] and providers["premium"]["reachable"]
        on = {name: providers[name]["pods"].get("Running", 0) for name in ("cheap", "premium")}
        assert on["cheap"] + on["premium"] == 3 and on["premium"] >= 1
        assert providers["cheap"]["spend_per_hour"] == pytest.approx(1.0 * on["cheap"])
        assert providers["premium"]["spend_per_hour"] == pytest.approx(3.0 * on["premium"])
        assert providers["cheap"]["catalog_age_seconds"] is not None
        assert [(e["provider"], e["reason"]) for e in state["blocklist"]] == [
            ("cheap", "HTTP 409 NoCapacity: sold out")
        ]
        assert 0 < state["blocklist"][0]["expires_in_seconds"] <= 600
        assert state["spend"] == [
            {
                "provider": name,
                "namespace": namespace,
                "pods": n,
                "per_hour": price * n,
                "namespace_cap": None,
            }
            for name, price, n in (("cheap", 1.0, on["cheap"]), ("premium", 3.0, on["premium"]))
            if n
        ]
        assert state["queue"]["unplaced_pods"] == 0

        table = await status("--admin", admin)
        assert table.returncode == 0, table.stderr
        out = table.stdout
        premium = f"{3.0 * on['premium']:.2f}/h"
        for needle in (
            "providers",
            "premium",
            f"Running {on['premium']}",
            premium,
            namespace,
            "blocklist",
            "sold out",
        ):
            assert needle in out, out

    gone = await status("--admin", admin)
    assert gone.returncode == 1 and "did not answer" in gone.stderr and "Traceback" not in gone.stderr
