"""``vkprovider gate`` refuses a bad or missing gate section with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.cli import main
from vkprovider.cli.gate import gated_nodes
from vkprovider.config import load_settings


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


NODES = "nodes: [{name: vk-a}, {name: vk-b}, {name: vk-c}]\ngate: {}\n"


def test_an_unknown_node_is_refused_naming_the_flag_and_the_configured_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(NODES)
    assert main(["gate", "--config", str(config), "--node", "vk-a", "--node", "vk-z"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --node: 'vk-z' is not a configured node") and "vk-a, vk-b, vk-c" in err


def test_every_configured_node_is_gated_unless_node_names_some(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(NODES)
    settings = load_settings(config)
    assert [n.name for n in gated_nodes(settings, None)] == ["vk-a", "vk-b", "vk-c"]
    assert [n.name for n in gated_nodes(settings, ["vk-c", "vk-a", "vk-c"])] == ["vk-c", "vk-a"]
    one = tmp_path / "one.yaml"
    one.write_text("node: {name: vk-1}\ngate: {}\n")  # the single node: section
    assert [n.name for n in gated_nodes(load_settings(one), None)] == ["vk-1"]
