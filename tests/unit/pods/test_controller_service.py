"""A leadership term survives an API error during node registration: ``register()`` is retried
under supervision instead of ending the term (and, without election, the process)."""

from __future__ import annotations

import asyncio
import contextlib

from vkprovider.config import Settings
from vkprovider.kube.errors import KubeUnavailable
from vkprovider.service import Service


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
    service = Service(Settings())
    node, controller = FlakyNode(), IdleController()
    service.node, service.controller = node, controller  # type: ignore[assignment]
    term = asyncio.create_task(service._act())
    try:
        async with asyncio.timeout(30):
            await controller.started.wait()
        assert node.registers == 2
        assert not term.done()
    finally:
        term.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await term
