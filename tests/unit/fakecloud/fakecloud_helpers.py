"""Helpers for fakecloud tests (unique module name: importable without clashing conftests)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from vkprovider_fakecloud.config import FakeCloudConfig, parse_config

from tests import support
from vkprovider.plugins.api import Container, DeploymentRequest, EnvVar, FileMount, Port

T = TypeVar("T")

NODE = "vk-test"


def config(**overrides: Any) -> FakeCloudConfig:
    """Small, fast config: two offers with capacity 2 and 1, lifecycle in tenths of a second."""
    data: dict[str, Any] = {
        "provider": "fc-test",
        "seed": 7,
        "catalog": [
            {
                "id": "a100",
                "gpu_type": "A100-SXM4-80GB",
                "region": "eu-west",
                "price_per_hour": 1.5,
                "capacity": 2,
            },
            {
                "id": "h100",
                "gpu_type": "NVIDIA H100 80GB HBM3",
                "region": "eu-west",
                "price_per_hour": 2.5,
                "capacity": 1,
            },
        ],
        "lifecycle": {
            "provisioning_seconds": 0.05,
            "serving_after_seconds": 0.05,
            "log_interval_seconds": 0.05,
            "watch_poll_seconds": 0.02,
            "watch_heartbeat_seconds": 0.2,
        },
    }
    data.update(overrides)
    return parse_config(data)


def request(
    uid: str = "uid-1", *, node: str = NODE, gpu: str | None = "A100-SXM-80GB", **kwargs: Any
) -> DeploymentRequest:
    container = Container(
        name="server",
        image="ghcr.io/acme/llm:1",
        env=[EnvVar(name="MODE", value="prod"), EnvVar(name="TOKEN", value="s3cret-token", secret=True)],
        ports=[Port(container_port=8000)],
        files=[FileMount(path="/etc/tls/key", content=b"\x00\xffbinary-key", mode=0o400, secret=True)],
    )
    fields: dict[str, Any] = {
        "uid": uid,
        "namespace": "serving",
        "name": f"pod-{uid}",
        "node_name": node,
        "containers": [container],
        "gpu_type": gpu,
        "gpu_count": 1 if gpu else 0,
    }
    fields.update(kwargs)
    return DeploymentRequest(**fields)


async def eventually(
    check: Callable[[], Awaitable[T | None]], timeout: float = 5.0, interval: float = 0.02
) -> T:
    """``tests.support.eventually`` with a unit-test pace (short timeout, fast polling)."""
    result: T = await support.eventually(check, timeout=timeout, interval=interval)
    return result
