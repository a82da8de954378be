"""The ``quota:`` section of the config file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vkprovider.errors import InvalidRequest
from vkprovider.translate.quantity import parse_quantity

DEFAULT_RESOURCES = ("nvidia.com/gpu", "cpu", "memory")


class QuotaConfig(BaseModel):
    """Which ClusterQueue flavor to keep in sync, with which nodes, minus what reserve.

    Read by ``vkprovider quota`` and, when the section is present, by ``vkprovider serve``,
    which then runs the sync on its leader (the service's Lease)."""

    model_config = ConfigDict(extra="forbid")

    cluster_queue: str = Field(min_length=1, description="ClusterQueue whose quota is synced")
    flavor: str = Field(default="local-gpu", min_length=1, description="its ResourceFlavor for local nodes")
    node_selector: dict[str, str] = Field(
        default={"pool": "local-gpu"}, description="labels of the local nodes that count"
    )
    resources: list[str] = Field(
        default=list(DEFAULT_RESOURCES), min_length=1, description="resources whose nominalQuota is synced"
    )
    reserve: dict[str, str] = Field(
        default={}, description="quantities kept out of the quota (e.g. for inference)"
    )
    maintenance_taints: list[str] = Field(
        default=["node.kubernetes.io/maintenance"],
        description="taint keys that put a node in maintenance (cordoned nodes always are)",
    )
    interval_seconds: float = Field(default=10.0, gt=0, description="at most this long between syncs")
    dry_run: bool = Field(default=False, description="compute and log the change, write nothing")

    @field_validator("reserve")
    @classmethod
    def _quantities(cls, value: dict[str, str]) -> dict[str, str]:
        for name, amount in value.items():
            try:
                if parse_quantity(amount, name) < 0:
                    raise ValueError(f"{name}: must not be negative")
            except InvalidRequest as exc:
                raise ValueError(str(exc)) from None
        return value
