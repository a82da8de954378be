"""The smallest contract-abiding adapter: deployments kept in a dict, no I/O.

It is the reference for plugin authors (every rule of the contract in ~80 lines), and the
provider that unit tests and benchmarks subclass or use when the subject is not an adapter
(placement, the plugin host, gRPC overhead). By default deployments stay Pending: nothing runs
them. With ``run_at_once`` a deployment is Running and serving (ready, an address) the moment it
is created, so a benchmark of the pod path measures the service alone, no provider latency in it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from vkprovider.errors import NotFound
from vkprovider.models import (
    Capabilities,
    DeploymentRequest,
    DeploymentStatus,
    Offer,
    Phase,
    ProviderInfo,
    RateLimit,
)


class InMemoryProvider:
    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid")

        offers: list[Offer] = []
        #: deployments run and serve at once (Running, ready, an IP) instead of staying Pending
        run_at_once: bool = False

    def __init__(self, name: str, settings: BaseModel | None = None) -> None:
        self._name = name
        self.settings = settings
        offers = getattr(settings, "offers", None)
        self.catalog: list[Offer] = list(offers or [])
        self.run_at_once = bool(getattr(settings, "run_at_once", False))
        self.deployments: dict[str, DeploymentStatus] = {}

    @property
    def name(self) -> str:
        return self._name

    async def info(self) -> ProviderInfo:
        # A dict has no API limit: declare none, so placement adds no client-side limit of its own.
        capabilities = Capabilities(rate_limit=RateLimit()) if self.run_at_once else Capabilities()
        return ProviderInfo(name=self._name, adapter="memory", version="0", capabilities=capabilities)

    async def probe(self) -> None:
        return None

    async def offers(self) -> list[Offer]:
        return list(self.catalog)

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        """Idempotent on the UID: a second deploy returns the first deployment's status."""
        status = self.deployments.get(request.uid)
        if status is None:
            running = self.run_at_once
            status = DeploymentStatus(
                uid=request.uid,
                phase=Phase.RUNNING if running else Phase.PENDING,
                ready=running,
                node_name=request.node_name,
                provider_id=request.uid[:8],
                offer_id=request.offer_id or "",
                ip=_address(len(self.deployments)) if running else None,
                started_at=datetime.now(UTC) if running else None,
            )
            self.deployments[request.uid] = status
        return status

    async def get(self, uid: str) -> DeploymentStatus:
        if uid not in self.deployments:
            raise NotFound(f"no deployment for pod {uid}", provider=self._name)
        return self.deployments[uid]

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        return [s for s in self.deployments.values() if s.node_name == node_name]

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> bool:
        self.deployments.pop(uid, None)  # unknown UIDs succeed; nothing to drain, so no grace to give
        return True  # gone at once: the host needs no get to confirm it

    async def close(self) -> None:
        return None


def _address(index: int) -> str:
    """A distinct address in 10.128.0.0/9 per deployment (documentation-only, never dialled)."""
    index %= 2**23
    return f"10.{128 + (index >> 16)}.{(index >> 8) & 255}.{index & 255}"
