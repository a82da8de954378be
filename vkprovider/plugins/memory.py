"""The smallest contract-abiding adapter: deployments kept in a dict, no I/O.

It is the reference for plugin authors (every rule of the contract in ~60 lines), and the
provider that unit tests and benchmarks subclass or use when the subject is not an adapter
(placement, the plugin host, gRPC overhead). Deployments stay Pending: nothing runs them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from vkprovider.errors import NotFound
from vkprovider.models import DeploymentRequest, DeploymentStatus, Offer, Phase, ProviderInfo


class InMemoryProvider:
    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid")

        offers: list[Offer] = []

    def __init__(self, name: str, settings: BaseModel | None = None) -> None:
        self._name = name
        self.settings = settings
        offers = getattr(settings, "offers", None)
        self.catalog: list[Offer] = list(offers or [])
        self.deployments: dict[str, DeploymentStatus] = {}

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        return ProviderInfo(name=self._name, adapter="memory", version="0")

    async def probe(self) -> None:
        return None

    async def offers(self) -> list[Offer]:
        return list(self.catalog)

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        """Idempotent on the UID: a second deploy returns the first deployment's status."""
        status = self.deployments.get(request.uid)
        if status is None:
            status = DeploymentStatus(
                uid=request.uid,
                phase=Phase.PENDING,
                node_name=request.node_name,
                provider_id=request.uid[:8],
                offer_id=request.offer_id or "",
            )
            self.deployments[request.uid] = status
        return status

    async def get(self, uid: str) -> DeploymentStatus:
        if uid not in self.deployments:
            raise NotFound(f"no deployment for pod {uid}", provider=self._name)
        return self.deployments[uid]

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        return [s for s in self.deployments.values() if s.node_name == node_name]

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        self.deployments.pop(uid, None)  # unknown UIDs succeed; nothing runs, so no grace to give

    async def close(self) -> None:
        return None
