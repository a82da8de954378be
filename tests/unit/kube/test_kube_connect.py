"""Where a CLI command finds its cluster when no kubeconfig is given, as kubectl does, and a
clear error (never a traceback) when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.cli import main
from vkprovider.kube.client import default_kubeconfig


@pytest.fixture
def workstation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No in-cluster environment, an empty home."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_inside_a_pod_the_service_account_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBECONFIG", "/somewhere/config")
    assert default_kubeconfig() is None


def test_on_a_workstation_kubeconfig_then_home(workstation: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_kubeconfig() is None  # nothing at all
    home = workstation / ".kube" / "config"
    home.parent.mkdir()
    home.write_text("apiVersion: v1\n")
    assert default_kubeconfig() == str(home)
    monkeypatch.setenv("KUBECONFIG", f"/first/config:{home}")
    assert default_kubeconfig() == "/first/config"


def test_approve_csr_without_a_cluster_names_what_is_missing(
    workstation: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["approve-csr", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot load the in-cluster ServiceAccount")
    assert "--kubeconfig" in err and "Traceback" not in err


def test_a_broken_kubeconfig_is_named(workstation: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = workstation / "broken.yaml"
    broken.write_text("apiVersion: v1\nclusters: []\ncontexts: []\n")
    assert main(["approve-csr", "--dry-run", "--kubeconfig", str(broken)]) == 2
    assert f"error: cannot load kubeconfig {broken}" in capsys.readouterr().err
