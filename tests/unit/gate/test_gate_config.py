"""Bad gate configs are refused at start-up with the field named."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.config import load_settings
from vkprovider.errors import ConfigError


def load(tmp_path: Path, gate: str) -> object:
    path = tmp_path / "config.yaml"
    path.write_text("gate:\n" + gate)
    return load_settings(path)


def test_defaults_are_the_documented_taint_and_signal(tmp_path: Path) -> None:
    settings = load(tmp_path, "  dry_run: true\n")
    gate = settings.gate  # type: ignore[attr-defined]
    assert gate.taint.as_taint() == {"key": "local-capacity", "value": "available", "effect": "NoSchedule"}
    assert gate.signal.kind == "kube" and gate.signal.kube.node_selector == "pool=local-gpu"
    assert gate.untaint_below_free_gpus <= gate.taint_at_free_gpus


def test_no_gate_section_means_no_gate(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("node: {name: vk-1}\n")
    assert load_settings(path).gate is None


@pytest.mark.parametrize(
    ("gate", "field", "words"),
    [
        ("  taint_at_free_gpus: 2\n  untaint_below_free_gpus: 3\n", "gate", "inverted"),
        ("  interval_seconds: 0\n", "gate.interval_seconds", "greater than 0"),
        ("  interval_seconds: -5\n", "gate.interval_seconds", "greater than 0"),
        ("  signal_timeout_seconds: 0\n", "gate.signal_timeout_seconds", "greater than 0"),
        ("  signal: {kind: graphite}\n", "gate.signal.kind", "unknown signal kind"),
        ("  taint: {effect: NoExecute}\n", "gate.taint.effect", "NoExecute"),
        ("  taint: {effect: Sometimes}\n", "gate.taint.effect", "unknown taint effect"),
        ("  taint: {effect: PreferNoSchedule}\n", "gate.taint.effect", "Descheduler"),
        ("  pending_hold_max_seconds: 0\n", "gate.pending_hold_max_seconds", "greater than 0"),
        ("  identity: ''\n", "gate.identity", "at least 1"),
        ("  signal: {prometheus: {url: 'ftp://x'}}\n", "gate.signal.prometheus.url", "pattern"),
        ("  dwel_seconds: 3\n", "gate.dwel_seconds", "Extra inputs"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, gate: str, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, gate)
    lines = str(err.value).splitlines()
    assert any(line.strip().startswith(f"{field}:") and words in line for line in lines), lines
