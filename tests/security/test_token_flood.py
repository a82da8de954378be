"""Attack: no credentials, many connections, a random bearer token on every request, against
the real kubelet API (TLS) and the real admin API of a running service, on 127.0.0.1.

Every unknown token costs a TokenReview. When reviews shared the service's one API client and
limiter with the node Lease, the queue of reviews delayed Lease renewals past the lease
duration, and the node went NotReady with no credentials needed. The check is behavioural:
while the flood runs, the node Lease's ``renewTime`` (as the apiserver has it) never falls
behind by a lease duration, and the attackers only ever get 401 or 429.

The service's shared limiter is set tight here (10 QPS) so that a bounded flood from one test
process is enough to show the old shape: what the deployment's 50 QPS took 2,000 connections for.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from vkprovider_fakecloud.config import parse_config
from vkprovider_fakecloud.server import running_fakecloud

from tests.support import eventually
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient
from vkprovider.service import Service

pytestmark = pytest.mark.cluster

FLOOD = Path(__file__).resolve().parents[2] / "bench" / "flood.py"
LEASE_SECONDS = 10
FLOOD_SECONDS = 3 * LEASE_SECONDS
CONNECTIONS = 150  # per API


@dataclass
class Running:
    name: str
    service: Service
    kube: KubeClient
    admin_url: str
    kubelet_url: str


@pytest.fixture
async def running(cluster: Cluster) -> AsyncIterator[Running]:
    serving = cluster.kubelet_serving
    assert serving is not None  # issued for 127.0.0.1 too
    cloud = parse_config(
        {
            "provider": "flooded",
            "catalog": [{"id": "h100", "gpu_type": "H100-SXM-80GB", "price_per_hour": 1.0, "capacity": 8}],
        }
    )
    name = f"vk-flood-{uuid.uuid4().hex[:6]}"
    port = free_port()
    async with running_fakecloud(cloud) as server:
        settings = Settings(
            node={
                "name": name,
                "internal_ip": "127.0.0.1",
                "kubelet_port": port,
                "lease_duration_seconds": LEASE_SECONDS,
                "lease_renew_seconds": 1,
                "status_update_seconds": 2,
            },
            kube={"kubeconfig": str(cluster.kubeconfig), "qps": 10, "burst": 10},
            pods={"drain_timeout_seconds": 1},
            # Beyond loopback, so the admin API authenticates (the attackers use 127.0.0.1).
            http={"admin_host": "0.0.0.0", "admin_port": 0},
            kubelet={
                "bind_host": "127.0.0.1",
                "tls_cert_file": str(serving.cert),
                "tls_key_file": str(serving.key),
                "client_ca_file": str(cluster.ca_cert),
            },
            providers=[{"name": "flooded", "adapter": "fakecloud", "settings": {"url": server.url}}],
        )
        service = Service(settings)
        task = asyncio.create_task(service.run())
        kube = await KubeClient.connect(str(cluster.kubeconfig))

        async def started() -> bool:
            if task.done():
                task.result()
            return (
                service.kubelet is not None and service.node is not None and service.node.lease.renewals > 0
            )

        try:
            await eventually(started, timeout=60)
            assert service.admin is not None
            yield Running(
                name,
                service,
                kube,
                f"http://127.0.0.1:{service.admin.port}/state",
                f"https://127.0.0.1:{port}/pods",
            )
        finally:
            service.stopping.set()
            # Shutdown is not under test: reviews the flood left queued may outlast a patient wait.
            done, _ = await asyncio.wait({task}, timeout=60)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await kube.close()


async def start_flood(url: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(FLOOD),
        f"--url={url}",
        f"--connections={CONNECTIONS}",
        f"--seconds={FLOOD_SECONDS}",
        "--requests=100000",
        stdout=asyncio.subprocess.PIPE,
    )


def renew_time(lease: dict[str, object]) -> float:
    spec = lease["spec"]
    assert isinstance(spec, dict)
    return datetime.strptime(str(spec["renewTime"]), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def test_random_token_flood_does_not_stall_the_node_lease(running: Running) -> None:
    floods = [await start_flood(running.admin_url), await start_flood(running.kubelet_url)]
    outputs = [asyncio.create_task(proc.communicate()) for proc in floods]
    behind: list[float] = []
    try:
        while not all(output.done() for output in outputs):
            lease = await running.kube.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{running.name}"
            )
            behind.append(time.time() - renew_time(lease))
            await asyncio.wait(outputs, timeout=1.0)
        results = [json.loads(output.result()[0]) for output in outputs]
    finally:
        for proc in floods:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    admin, kubelet = (result["answers"] for result in results)
    # The node Lease kept renewing all along: never a lease duration behind.
    assert len(behind) >= FLOOD_SECONDS // 2
    assert max(behind) < LEASE_SECONDS, f"the Lease fell {max(behind):.1f}s behind under the flood: {behind}"
    # The attack reached both APIs (the connection caps of ``http/limits.py`` refuse part of it,
    # and refusals are paced), and no attacker got anything but 401/429.
    assert sum(admin.values()) > 0 and sum(kubelet.values()) > 0, (admin, kubelet)
    assert set(admin) | set(kubelet) <= {"401", "429"}, (admin, kubelet)
