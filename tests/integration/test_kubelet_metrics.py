"""metrics-server v0.8.0 scraping the virtual node: ``kubectl top pod`` and an HPA that follows
fakecloud's load up and down, through the real aggregation layer and controller-manager."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.integration import test_kubelet_api
from tests.integration.test_kubelet_api import Node, kubectl
from tests.support import eventually
from vkprovider.devcluster import Cluster, metrics_server

pytestmark = pytest.mark.cluster
node = test_kubelet_api.node  # the virtual node with its kubelet API on the namespace address

JSON = dict[str, Any]


async def ensure_metrics_server(cluster: Cluster) -> None:
    if not any(p.name == "metrics-server" and p.alive() for p in cluster.processes):
        await metrics_server.start(cluster)
    async with cluster.http() as client:
        await eventually(lambda: metrics_server.available(client), timeout=180, interval=2)


def web_deployment(node_name: str) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node_name},
                    "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.example/llm:1",
                            "resources": {
                                "requests": {"cpu": "100m"},
                                "limits": {"nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                },
            },
        },
    }


def hpa() -> JSON:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
                },
            },
        },
    }


async def test_kubectl_top_and_hpa_follow_fakecloud_load(
    cluster: Cluster, node: Node, namespace: str
) -> None:
    started = time.monotonic()
    timeline: list[tuple[float, str]] = []
    await ensure_metrics_server(cluster)
    timeline.append((time.monotonic() - started, "metrics API available"))
    async with httpx.AsyncClient(base_url=node.cloud_admin, timeout=10) as cloud:
        (await cloud.put("/load", json={"cpu_cores": 0.02})).raise_for_status()
        await node.kube.request(
            "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=web_deployment(node.name)
        )

        async def top() -> str | None:
            done = await kubectl(cluster, "top", "pod", "-n", namespace, "--no-headers")
            return done.stdout if done.returncode == 0 and "web-" in done.stdout else None

        shown = await eventually(top, timeout=180, interval=3)
        timeline.append((time.monotonic() - started, f"kubectl top pod: {shown.strip()}"))
        cpu = shown.split()[1]
        assert cpu.endswith("m") and 10 <= int(cpu[:-1]) <= 40, shown  # ~20m: the load knob

        await node.kube.request(
            "POST", f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers", body=hpa()
        )
        (await cloud.put("/load", json={"total_cpu_cores": 0.4})).raise_for_status()
        timeline.append((time.monotonic() - started, "load up: 400m shared"))

        async def replicas(want: int) -> bool:
            dep = await node.kube.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
            return int(dep["spec"]["replicas"]) == want and int(dep["status"].get("readyReplicas", 0)) == want

        await eventually(lambda: replicas(3), timeout=300, interval=2)
        timeline.append((time.monotonic() - started, "scaled up to 3 (Ready)"))
        (await cloud.put("/load", json={"total_cpu_cores": 0.01})).raise_for_status()
        timeline.append((time.monotonic() - started, "load down: 10m shared"))
        await eventually(lambda: replicas(1), timeout=300, interval=2)
        timeline.append((time.monotonic() - started, "scaled down to 1"))
    print("\nHPA timeline:\n" + "\n".join(f"  t+{t:6.1f}s  {what}" for t, what in timeline))
