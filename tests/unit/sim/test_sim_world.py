"""Timeline steps in real time, and a provider capacity limit against a real fakecloud server."""

from __future__ import annotations

from typing import Any

import httpx
from vkprovider_fakecloud.config import parse_config
from vkprovider_fakecloud.server import running_fakecloud

from vkprovider.plugins.api import Container, DeploymentRequest
from vkprovider.sim import manifests
from vkprovider.sim.scenario import parse_scenario
from vkprovider.sim.world import World

S = parse_scenario(
    {
        "name": "world",
        "clock": {"day": "10h", "real_seconds": 100},  # 360 simulated seconds per real second
        "fleet": {"nodes": 2, "gpus_per_node": 4},
        "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 3, "startup": "1h"}],
        "workloads": [{"name": "chat", "replicas": 2}],
        "timeline": [
            {"at": "6h", "scale": {"workload": "chat", "replicas": 3}},
            {"at": "1h", "training": {"name": "train", "gpus": 8, "duration": "2h"}},
            {"at": "2h", "maintenance": {"node": 1, "duration": "30m"}},
            {"at": "4h", "outage": {"provider": "cheap"}},
            {"at": "5h", "capacity": {"provider": "cheap", "capacity": 1}},
        ],
    }
)


def test_the_timeline_becomes_real_time_steps_with_their_ends() -> None:
    world = World(S, kube=None, clouds={}, real_jobs=True)  # type: ignore[arg-type]
    steps = [(round(step.at, 3), step.label) for step in world.steps()]
    assert steps == [
        (10.0, "training train arrives"),
        (20.0, "node 1 cordoned"),
        (25.0, "node 1 back"),
        (30.0, "training train ends"),
        (40.0, "cheap outage"),  # no duration: the rest of the day, no end step
        (50.0, "cheap capacity 1"),
        (60.0, "chat -> 3"),
    ]


def request(uid: str) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid, name=uid, namespace="default", node_name="vk", containers=[Container(name="c", image="i")]
    )


async def test_a_capacity_limit_holds_as_instances_end() -> None:
    config: dict[str, Any] = manifests.fakecloud_config(S, S.providers[0])
    assert config["lifecycle"]["provisioning_seconds"] == 10.0  # 1h at x360
    async with running_fakecloud(parse_config(config)) as server:
        world = World(S, kube=None, clouds={"cheap": server.url}, real_jobs=True)  # type: ignore[arg-type]
        try:
            for uid in ("a", "b"):
                server.store.create(request(uid), {})
            action = await world.set_capacity(S.events()[3].capacity)  # type: ignore[arg-type]
            assert (action.kind, action.subject, action.value) == ("capacity", "cheap", 1.0)
            async with httpx.AsyncClient(base_url=server.url) as client:

                async def free() -> int:
                    return sum((await client.get("/admin/offers")).json().values())

                assert await free() == 0  # 2 running, at most 1: nothing free
                server.store.remove("a")  # fakecloud gives the unit back...
                assert await free() == 1
                await world.enforce_limits()  # ...and the limit takes it away again
                assert await free() == 0
                server.store.remove("b")
                await world.enforce_limits()
                assert await free() == 1
        finally:
            await world.close()
