"""fakecloud's deployments answer requests at their address: which ones listen when, and (where
this machine has network namespaces) the answer, the round-trip knob and the stop on delete."""

from __future__ import annotations

import asyncio
import os

import pytest
from fakecloud_helpers import config, eventually, request
from vkprovider_fakecloud.config import FakeCloudConfigError, parse_config
from vkprovider_fakecloud.replicas import ReplicaServers, serving
from vkprovider_fakecloud.state import Store

from vkprovider.devcluster.datapath import DataPath, provider_range, why_unavailable
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import get
from vkprovider.plugins.api import Port


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_deployment_listens_from_its_start_until_it_is_deleted_on_its_tcp_ports() -> None:
    clock = Clock()
    store = Store(config(ip_range=provider_range(0)), clock)
    req = request("uid-1")
    req.containers[0].ports.append(Port(container_port=5353, protocol="UDP"))
    deployment, _ = store.create(req, {})
    assert serving(store) == {}  # still provisioning: no address, nothing listens
    clock.now += 1.0
    assert serving(store) == {(deployment.ip, 8000): deployment}  # the UDP port is not served
    store.remove("uid-1")
    assert serving(store) == {}


def test_the_config_names_the_namespace_and_the_knob_refuses_a_negative_delay() -> None:
    assert config(serve_netns="vkp-x-back").serve_netns == "vkp-x-back"
    with pytest.raises(FakeCloudConfigError, match=r"knobs\.round_trip_seconds"):
        parse_config({**config().model_dump(), "knobs": {"round_trip_seconds": -1}})


@pytest.fixture
def backends() -> object:
    reason = why_unavailable()
    if reason:
        pytest.skip(f"no network namespaces here: {reason}")
    path = DataPath.create(f"fcu-{os.getpid()}")
    path.route(provider_range(0))
    yield path
    path.remove()


async def test_a_running_deployment_answers_in_the_namespace_after_the_round_trip_knob(
    backends: DataPath,
) -> None:
    store = Store(config(ip_range=provider_range(0), serve_netns=backends.backends))
    servers = ReplicaServers(store, backends.backends)
    task = asyncio.create_task(servers.run())
    node = NetnsSockets(backends.node)  # from the node namespace, through its route
    try:
        deployment, _ = store.create(request("uid-1"), {})
        await eventually(lambda: _listening(servers))
        answer = await get(await node.client(), deployment.ip, 8000)
        assert answer == {
            "where": "external",
            "provider": "fc-test",
            "deployment": deployment.provider_id,
            "pod_uid": "uid-1",
        }
        store.knobs = store.knobs.model_copy(update={"round_trip_seconds": 60.0})
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await get(await node.client(), deployment.ip, 8000)
        store.remove("uid-1")
        await eventually(lambda: _closed(servers))
        with pytest.raises(ConnectionRefusedError):
            await get(await node.client(), deployment.ip, 8000)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        node.close()


async def _listening(servers: ReplicaServers) -> bool:
    return bool(servers.servers)


async def _closed(servers: ReplicaServers) -> bool:
    return not servers.servers
