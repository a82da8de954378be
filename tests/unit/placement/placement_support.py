"""Test helpers: a real in-memory provider (implements the Provider protocol), a manual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from vkprovider.models import (
    Container,
    DeploymentRequest,
    DeploymentStatus,
    Offer,
)
from vkprovider.plugins.memory import InMemoryProvider


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class MemProvider(InMemoryProvider):
    """The in-memory reference provider with scripted deploy failures and a failing catalog."""

    def __init__(
        self, name: str, offers: Iterable[Offer] = (), failures: Iterable[BaseException] = ()
    ) -> None:
        super().__init__(name)
        self.catalog = list(offers)
        self.failures = list(failures)  # raised by successive deploy calls, then success
        self.offers_error: BaseException | None = None
        self.deploy_calls: list[DeploymentRequest] = []
        self.after_create: list[BaseException] = []  # raised by deploys that did create it
        self.get_failures: list[BaseException] = []  # raised by successive get calls
        self.get_calls = 0
        self.deleted: list[str] = []
        self.deploy_seconds = 0.0  # real time each deploy takes (concurrency tests)

    async def offers(self) -> list[Offer]:
        if self.offers_error is not None:
            raise self.offers_error
        return await super().offers()

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        self.deploy_calls.append(request)
        if self.deploy_seconds:
            await asyncio.sleep(self.deploy_seconds)
        if self.failures:
            raise self.failures.pop(0)
        status = await super().deploy(request)
        if self.after_create:
            raise self.after_create.pop(0)
        return status

    async def get(self, uid: str) -> DeploymentStatus:
        self.get_calls += 1
        if self.get_failures:
            raise self.get_failures.pop(0)
        return await super().get(uid)

    async def delete(self, uid: str) -> None:
        self.deleted.append(uid)
        await super().delete(uid)


def offer(
    provider: str,
    offer_id: str,
    price: float,
    *,
    gpu: str = "H100-SXM-80GB",
    count: int = 1,
    region: str = "us-east",
    capacity: int = 5,
    spot: bool = False,
    memory: float = 0.0,
) -> Offer:
    return Offer(
        provider=provider,
        offer_id=offer_id,
        gpu_type=gpu,
        gpu_count=count,
        gpu_memory_gb=memory,
        region=region,
        price_per_hour=price,
        capacity=capacity,
        spot=spot,
    )


def request(
    uid: str = "uid-1", *, gpu: str | None = None, count: int = 1, memory: float = 0.0, namespace: str = "ns"
) -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace=namespace,
        name=f"pod-{uid}",
        node_name="vk-external",
        containers=[Container(name="main", image="img")],
        gpu_type=gpu,
        gpu_count=count,
        gpu_memory_gb=memory,
    )


async def placer_for(*providers: MemProvider, config: object = None, clock: Clock | None = None) -> object:
    """A refreshed Placer over ``providers`` (typed loosely to keep this module import-light)."""
    from vkprovider.placement import PlacementConfig, Placer

    clock = clock or Clock()
    placer = Placer(
        {p.name: p for p in providers},
        config if isinstance(config, PlacementConfig) else PlacementConfig(),
        clock=clock,
        sleep=clock.sleep,
    )
    await placer.refresh()
    return placer


class StaticAdapter(MemProvider):
    """A registry-loadable adapter (``adapter: "placement_support:StaticAdapter"``) for CLI tests."""

    from pydantic import BaseModel as _Base

    class Settings(_Base):
        offers: list[dict[str, object]] = []

    def __init__(self, name: str, settings: StaticAdapter.Settings) -> None:
        super().__init__(name, [Offer.model_validate({"provider": name, **o}) for o in settings.offers])
