"""Config validation, the example configs, and the CLI as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest
from vkprovider_fakecloud.config import FakeCloudConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "deploy" / "examples"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"catalog": []}, "catalog"),
        ({"catalog": [{"gpu_type": "T4"}]}, "catalog.0.price_per_hour"),
        ({"catalog": [{"gpu_type": "T4", "price_per_hour": -1}]}, "catalog.0.price_per_hour"),
        ({"catalog": [{"gpu_type": "T4", "price_per_hour": 1, "capacity": -2}]}, "catalog.0.capacity"),
        (
            {"catalog": [{"gpu_type": "T4", "price_per_hour": 1}], "knobs": {"error_rate": 3}},
            "knobs.error_rate",
        ),
        (
            {"catalog": [{"gpu_type": "T4", "price_per_hour": 1}], "lifecycle": {"provisoning": 1}},
            "lifecycle.provisoning",
        ),
        (
            {
                "catalog": [
                    {"gpu_type": "T4", "price_per_hour": 1},
                    {"gpu_type": "Tesla T4", "price_per_hour": 2},
                ]
            },
            "duplicate",
        ),
    ],
)
def test_invalid_config_names_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(FakeCloudConfigError) as info:
        parse_config(data, "test.yaml")
    assert field in str(info.value) and "test.yaml" in str(info.value)


def test_example_configs_are_two_providers_with_different_prices() -> None:
    cheap = load_config(EXAMPLES / "fakecloud-cheap.yaml")
    premium = load_config(EXAMPLES / "fakecloud-premium.yaml")
    assert cheap.provider != premium.provider

    def price(cfg: object, gpu: str) -> float:
        return min(e.price_per_hour for e in cfg.catalog if e.gpu_type == gpu and e.gpu_count == 1)  # type: ignore[attr-defined]

    for gpu in ("A100-SXM-80GB", "H100-SXM-80GB"):
        assert price(cheap, gpu) < price(premium, gpu)
    assert sum(e.capacity for e in cheap.catalog) < sum(e.capacity for e in premium.catalog)
    assert {e.region for e in cheap.catalog} == {"eu-west"}


def test_missing_or_broken_file(tmp_path: Path) -> None:
    with pytest.raises(FakeCloudConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("catalog: [\n")
    with pytest.raises(FakeCloudConfigError, match="not valid YAML"):
        load_config(broken)


async def test_cli_serves_on_a_free_port_and_stops_on_sigterm() -> None:
    cmd = [
        sys.executable,
        "-m",
        "vkprovider",
        "fakecloud",
        "--port",
        "0",
        "--config",
        str(EXAMPLES / "fakecloud-premium.yaml"),
    ]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(20):
            assert proc.stdout is not None
            line = (await proc.stdout.readline()).decode().strip()
            assert line.startswith("fakecloud listening on http://127.0.0.1:"), line
            url = line.rsplit(" ", 1)[1]
            async with httpx.AsyncClient(base_url=url) as client:
                offers = (await client.get("/v1/offers")).json()
            assert any(o["gpu_type"] == "L40S-48GB" for o in offers)
            os.kill(proc.pid, signal.SIGTERM)
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_cli_reports_bad_config_as_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("catalog: [{gpu_type: T4}]\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "fakecloud", "--config", str(bad),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(20):
        _, stderr = await proc.communicate()
    assert proc.returncode == 2
    assert b"catalog.0.price_per_hour" in stderr and b"Traceback" not in stderr
