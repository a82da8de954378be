"""Configuration of one Vast.ai provider instance (the ``settings:`` block of its provider entry)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from vkprovider.plugins.api import DEFAULT_LOG_STREAM_CONNECTIONS, ApiKeySettings


class VastAiSettings(ApiKeySettings):
    """Search filters, instance defaults and the API key (supplied in exactly one of three ways)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "https://console.vast.ai"
    # offer search (POST /api/v0/bundles)
    verified_only: bool = True
    min_reliability: float = Field(default=0.98, ge=0, le=1)
    gpu_names: list[str] = Field(default=[], description="Vast gpu_name values to search; empty = any")
    num_gpus: list[int] = Field(default=[], description="GPU counts to search; empty = any")
    countries: list[str] = Field(default=[], description="two-letter country codes; empty = any")
    max_price_per_hour: float | None = Field(default=None, gt=0)
    search_limit: int = Field(default=200, ge=1, le=1000)
    #: Also search interruptible (bid) offers and advertise them as spot offers.
    interruptible: bool = False
    #: Bid = offer ``min_bid`` x this; a little above the minimum makes being outbid less likely.
    bid_multiplier: float = Field(default=1.1, ge=1.0)
    # instance defaults (PUT /api/v0/asks/{id})
    disk_gb: float = Field(default=32.0, gt=0)
    timeout_seconds: float = Field(default=30.0, gt=0)
    max_connections: int = Field(default=20, ge=1)
    #: Log snapshots are fetched over a pool of their own, never the one status/deploy/delete use.
    log_max_connections: int = Field(default=DEFAULT_LOG_STREAM_CONNECTIONS, ge=1)
    max_list_pages: int = Field(default=200, ge=1, description="25 instances per page")
    # logs: the API uploads a snapshot to object storage and returns its URL
    log_fetch_attempts: int = Field(default=10, ge=1)
    log_fetch_interval_seconds: float = Field(default=1.0, ge=0)
