"""``vkprovider quota`` refuses a config it cannot act on, naming what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.cli import main


def test_a_config_without_a_quota_section_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("log_level: INFO\n")
    assert main(["quota", "--config", str(config)]) == 2
    assert "quota: section missing" in capsys.readouterr().err


def test_a_bad_quota_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("quota:\n  cluster_queue: training\n  interval_seconds: 0\n")
    assert main(["quota", "--config", str(config)]) == 2
    assert "quota.interval_seconds" in capsys.readouterr().err
