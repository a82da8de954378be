"""``vkprovider gate`` refuses a bad or missing gate section with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.cli import main


def test_an_inverted_band_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("gate:\n  taint_at_free_gpus: 2\n  untaint_below_free_gpus: 4\n")
    assert main(["gate", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid configuration") and "untaint_below_free_gpus (4)" in err


def test_no_gate_section_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("node: {name: vk-1}\n")
    assert main(["gate", "--config", str(config)]) == 2
    assert "has no gate: section" in capsys.readouterr().err
