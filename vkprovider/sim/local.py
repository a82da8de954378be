"""A virtual node wired from real parts, in one process: for integration tests and bench/.

Real fakecloud HTTP servers on 127.0.0.1, the real fakecloud adapter, the real Placer, NodeAgent
and PodController, against the session's real control plane. ``crash()`` drops everything
without a drain (as SIGKILL would) and ``restart()`` builds fresh service objects over the same
clouds, so tests can check restart resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from vkprovider.config import NodeConfig
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.node.agent import NodeAgent
from vkprovider.placement import PlacementConfig, Placer
from vkprovider.plugins.api import Provider
from vkprovider.plugins.guard import guard
from vkprovider.plugins.registry import instantiate
from vkprovider.pods.controller import PodController

JSON = dict[str, Any]


def fakecloud_module(module: str) -> Any:
    """fakecloud is an adapter package, loaded by name: the service never imports adapters."""
    return importlib.import_module(f"vkprovider_fakecloud.{module}")


def cloud_config(
    name: str, price: float, *, capacity: int = 8, gpu: str = "H100-SXM-80GB", **lifecycle: Any
) -> Any:
    return fakecloud_module("config").parse_config(
        {
            "provider": name,
            "seed": 7,
            "catalog": [
                {
                    "id": f"{name}-h100",
                    "gpu_type": gpu,
                    "gpu_count": 1,
                    "region": "eu-west",
                    "price_per_hour": price,
                    "capacity": capacity,
                },
            ],
            "lifecycle": {"provisioning_seconds": 0.2, "serving_after_seconds": 0.3, **lifecycle},
        }
    )


@dataclass
class VirtualNode:
    cluster: Cluster
    name: str
    clouds: dict[str, Any]  #: name -> vkprovider_fakecloud.server.FakeCloudServer
    placement: PlacementConfig
    controller_options: dict[str, Any]
    kube_qps: float = 200.0
    kube: KubeClient | None = None
    providers: dict[str, Provider] = field(default_factory=dict)
    placer: Placer | None = None
    controller: PodController | None = None
    agent: NodeAgent | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        self.kube = await KubeClient.connect(
            str(self.cluster.kubeconfig), qps=self.kube_qps, burst=int(2 * self.kube_qps)
        )
        self.providers = {
            # guarded as the service's registry guards them (checks, metrics, secret scrubbing)
            name: guard(instantiate("fakecloud", name, {"url": cloud.url}))
            for name, cloud in self.clouds.items()
        }
        self.placer = Placer(self.providers, self.placement)
        await self.placer.refresh()
        node_config = NodeConfig(
            name=self.name, lease_renew_seconds=1.0, status_update_seconds=2.0, probe_seconds=0.5
        )
        self.agent = NodeAgent(self.kube, node_config, self.providers, self.placer)
        await self.agent.register()
        options = {
            "status_poll_seconds": 0.3,
            "orphan_gc_seconds": 1.0,
            "lost_grace_seconds": 3.0,
            "backoff_base_seconds": 0.2,
            "backoff_max_seconds": 2.0,
            "zone": node_config.topology_zone(),
            **self.controller_options,
        }
        self.controller = PodController(
            self.kube, self.providers, self.placer, node_name=self.name, host_ip="127.0.0.1", **options
        )
        self._tasks = [
            asyncio.create_task(self.agent.run()),
            asyncio.create_task(self.controller.run()),
            asyncio.create_task(self.placer.run()),
        ]
        async with asyncio.timeout(30):
            await self.controller.synced.wait()

    async def crash(self) -> None:
        """Stop abruptly: no drain, no cleanup in the providers (like SIGKILL)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for provider in self.providers.values():
            await provider.close()
        if self.kube is not None:
            await self.kube.close()

    async def restart(self) -> None:
        await self.crash()
        await self.start()

    async def stop(self) -> None:
        await self.crash()
        for cloud in self.clouds.values():
            await cloud.stop()


async def start_virtual_node(
    cluster: Cluster,
    clouds: dict[str, Any],
    *,
    placement: PlacementConfig | None = None,
    kube_qps: float = 200.0,
    **controller_options: Any,
) -> VirtualNode:
    servers = {}
    for name, config in clouds.items():
        server = fakecloud_module("server").FakeCloudServer(config)
        await server.start()
        servers[name] = server
    node = VirtualNode(
        cluster,
        f"vk-{uuid.uuid4().hex[:8]}",
        servers,
        placement or PlacementConfig(offer_refresh_seconds=1.0, blocklist_ttl_seconds=5.0),
        controller_options,
        kube_qps,
    )
    await node.start()
    return node


def inference_deployment(
    name: str,
    node: str,
    replicas: int,
    *,
    gpus: int = 1,
    env: list[JSON] | None = None,
    grace_seconds: int = 5,
) -> JSON:
    """A Deployment that can only land on the virtual node (selector + toleration)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": [
                        {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "terminationGracePeriodSeconds": grace_seconds,
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.example/llm-server:1.0",
                            "args": ["--port", "8000"],
                            "ports": [{"containerPort": 8000}],
                            "env": env or [],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
            },
        },
    }
