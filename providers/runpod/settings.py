"""Configuration of one RunPod provider instance (the ``settings:`` block of its provider entry)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from vkprovider.plugins.api import DEFAULT_LOG_STREAM_CONNECTIONS, ApiKeySettings

CloudType = Literal["SECURE", "COMMUNITY"]
AvailabilityLevel = Literal["NONE", "LOW", "MEDIUM", "HIGH"]


class RunPodSettings(ApiKeySettings):
    """Everything an operator can tune; the API key is supplied in exactly one of three ways."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "https://api.runpod.io"
    cloud_types: list[CloudType] = Field(default=["SECURE"], min_length=1)
    data_centers: list[str] = Field(default=[], description="restrict offers/placement; empty = any")
    gpu_types: list[str] = Field(default=[], description="restrict offers (RunPod ids or normalized)")
    gpu_counts: list[int] = Field(default=[1, 2, 4, 8], min_length=1)
    container_disk_gb: int = Field(default=50, ge=1)
    #: The catalog reports stock as a level, not a number; this turns it into ``Offer.capacity``.
    capacity_by_availability: dict[AvailabilityLevel, int] = {"NONE": 0, "LOW": 1, "MEDIUM": 3, "HIGH": 10}
    timeout_seconds: float = Field(default=30.0, gt=0)
    max_connections: int = Field(default=20, ge=1)
    #: Log streams have a pool of their own (a follow holds its connection for its whole life).
    log_max_connections: int = Field(default=DEFAULT_LOG_STREAM_CONNECTIONS, ge=1)
    #: Without ``follow``, the SSE log stream is read until it is idle this long (it never ends).
    log_idle_seconds: float = Field(default=2.0, gt=0)

    @model_validator(mode="after")
    def _positive_gpu_counts(self) -> RunPodSettings:
        if any(count < 1 for count in self.gpu_counts):
            raise ValueError("gpu_counts must be positive")
        return self
