"""``make demo`` fails loudly when an invariant broke: exit status 3, each broken invariant named
on stderr, the verdict first in what it prints (the run itself is replaced by a recording)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_sim_report import recording  # pytest puts this directory on sys.path (no __init__.py)

from vkprovider.sim import demo, report


def fake_run(tmp_path: Path, orphans: list[str]) -> Any:
    async def run(scenario: Any, options: Any) -> Any:
        rec = recording()
        rec.orphans = orphans
        folder = report.write(rec, tmp_path / "r")
        stack = SimpleNamespace(
            logs=tmp_path, admin_url="http://127.0.0.1:1", cluster=SimpleNamespace(kubeconfig="kc")
        )
        return SimpleNamespace(folder=folder, recording=rec, stack=stack)

    return run


async def test_a_broken_invariant_exits_3_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "run", fake_run(tmp_path, ["dear/d-9 (pod x)"]))
    assert await demo.up(demo.DEFAULT_SCENARIO) == demo.BROKEN == 3
    err = capsys.readouterr().err
    assert "**Verdict: BROKEN** — 1 orphaned deployments after settling" in err
    assert "error: invariants broken in this run: 1 orphaned deployments after settling" in err


async def test_a_clean_run_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "run", fake_run(tmp_path, []))
    assert await demo.up(demo.DEFAULT_SCENARIO) == 0
    captured = capsys.readouterr()
    assert "**Verdict: every invariant held**" in captured.err
    assert captured.out.startswith("export KUBECONFIG=kc ")
