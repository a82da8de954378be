"""A leadership term survives an API error during node registration: ``register()`` is retried
under supervision instead of ending the term (and, without election, the process)."""

from __future__ import annotations

import asyncio
import contextlib

from kubernetes_asyncio import client

from vkprovider.config import Settings
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeUnavailable
from vkprovider.placement import Placer
from vkprovider.pods.controller import PodController
from vkprovider.served_node import ServedNode


class FlakyNode:
    """The apiserver is restarting during the first registration."""

    def __init__(self) -> None:
        self.registers = 0

    async def register(self) -> None:
        self.registers += 1
        if self.registers == 1:
            raise KubeUnavailable(503, "the apiserver is restarting")

    async def run(self) -> None:
        await asyncio.sleep(3600)


class IdleController:
    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self) -> None:
        self.started.set()
        await asyncio.sleep(3600)


async def test_a_failed_registration_is_retried_and_the_term_goes_on() -> None:
    settings = Settings()
    node, controller = FlakyNode(), IdleController()
    unit = ServedNode(settings, settings.node, None, None, {}, Placer({}), node, controller)  # type: ignore[arg-type]
    term = asyncio.create_task(unit.act())
    try:
        async with asyncio.timeout(30):
            await controller.started.wait()
        assert node.registers == 2
        assert not term.done()
    finally:
        term.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await term


class Elector:
    def __init__(self, is_leader: bool, leader: str | None) -> None:
        self.is_leader, self.leader = is_leader, leader


async def test_readiness_is_never_stale_between_terms() -> None:
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    controller = PodController(KubeClient(api), {}, Placer({}), node_name="vk", host_ip="127.0.0.1")
    assert controller.readiness() == (False, {"ready": False, "role": "active", "term": 0, "synced": False})
    controller.elector = Elector(is_leader=False, leader="other")
    assert controller.readiness() == (True, {"ready": True, "role": "standby", "leader": "other"})
    controller.elector = Elector(is_leader=True, leader="me")  # elected, the term not synced yet
    ready, detail = controller.readiness()
    assert not ready and detail["role"] == "leader"
    controller.synced.set()  # left over from an earlier term: never enough without a running term
    assert controller.readiness()[0] is False
    await api.close()
