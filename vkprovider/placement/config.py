"""Placement configuration (the ``placement:`` section of the service config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PlacementConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    blocklist_ttl_seconds: float = Field(default=300.0, ge=0)
    offer_refresh_seconds: float = Field(default=30.0, gt=0)
