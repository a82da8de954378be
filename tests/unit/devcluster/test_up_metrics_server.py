"""``devcluster up --metrics-server`` on a cluster that already runs says so and fails (issue 29):
it used to print the export line and exit 0 with no metrics-server started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vkprovider.devcluster import __main__ as devcluster_cli


class Running:
    kubeconfig = Path("/tmp/kubeconfig")

    def running(self) -> bool:
        return True


@pytest.fixture
def already_running(monkeypatch: pytest.MonkeyPatch) -> None:
    def load(_: Any) -> Running:
        return Running()

    monkeypatch.setattr(devcluster_cli.Cluster, "load", staticmethod(load))


@pytest.mark.usefixtures("already_running")
def test_metrics_server_on_a_running_cluster_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert devcluster_cli.main(["up", "--metrics-server"]) == 2
    err = capsys.readouterr().err
    assert "already running" in err and "make cluster-down" in err


@pytest.mark.usefixtures("already_running")
def test_plain_up_on_a_running_cluster_prints_its_export_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert devcluster_cli.main(["up"]) == 0
    assert "export KUBECONFIG=/tmp/kubeconfig" in capsys.readouterr().out
