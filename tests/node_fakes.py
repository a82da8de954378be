"""A real in-process Provider whose probe can be switched to fail, for node-agent tests."""

from __future__ import annotations

import asyncio

from vkprovider.errors import InvalidRequest, NotFound, Transient
from vkprovider.models import DeploymentRequest, DeploymentStatus, Offer, ProviderInfo


def offer(provider: str, offer_id: str, gpu: str, count: int, capacity: int, price: float = 1.0) -> Offer:
    return Offer(
        provider=provider,
        offer_id=offer_id,
        gpu_type=gpu,
        gpu_count=count,
        price_per_hour=price,
        capacity=capacity,
    )


class SwitchableProvider:
    """Implements the Provider protocol; ``healthy = False`` makes probes raise ``Transient``."""

    def __init__(self, name: str, offers: list[Offer] | None = None) -> None:
        self._name = name
        self.catalog = list(offers or [])
        self.healthy = True
        self.hang = False
        self.probes = 0

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        return ProviderInfo(name=self._name, adapter="switchable", version="0")

    async def probe(self) -> None:
        self.probes += 1
        if self.hang:
            await asyncio.sleep(3600)
        if not self.healthy:
            raise Transient("backend unreachable", provider=self._name)

    async def offers(self) -> list[Offer]:
        return list(self.catalog)

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        raise InvalidRequest("this test provider does not deploy", provider=self._name)

    async def get(self, uid: str) -> DeploymentStatus:
        raise NotFound(uid, provider=self._name)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        return []

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        return None

    async def close(self) -> None:
        return None
