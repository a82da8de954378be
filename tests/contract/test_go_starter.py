"""The Go starter's committed generated code matches the proto (regenerated without a system
protoc: the pinned protoc-gen-go and grpcio-tools' bundled protoc), and the module vets clean.
The contract suite itself runs against the starter's example through ``harness_go.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SDK = REPO / "sdk" / "go"
MODULE = "github.com/vkprovider/vkprovider/sdk/go"
GO = shutil.which("go")

pytestmark = pytest.mark.skipif(GO is None, reason="Go toolchain not found on PATH: sdk/go is not checked")


def go(*args: str, env: dict[str, str] | None = None) -> str:
    assert GO is not None
    result = subprocess.run(
        [GO, *args], cwd=SDK, capture_output=True, text=True, timeout=600, env=env, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_generated_messages_match_the_proto(tmp_path: Path) -> None:
    go("install", "google.golang.org/protobuf/cmd/protoc-gen-go", env={**os.environ, "GOBIN": str(tmp_path)})
    out = tmp_path / "out"
    out.mkdir()
    command = [
        sys.executable, "-m", "grpc_tools.protoc", f"--plugin=protoc-gen-go={tmp_path / 'protoc-gen-go'}",
        "-Iproto", f"--go_out={out}", f"--go_opt=module={MODULE}",
        f"--go_opt=Mvkprovider/v1/provider.proto={MODULE}/vkproviderv1", "proto/vkprovider/v1/provider.proto",
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    generated = (out / "vkproviderv1" / "provider.pb.go").read_text()
    assert generated == (SDK / "vkproviderv1" / "provider.pb.go").read_text(), "run `make go-proto`"


def test_the_module_vets_clean() -> None:
    go("vet", "./...")


def test_the_starters_helpers_pass_their_go_tests() -> None:
    """``plugin.ErrorForStatus`` (the shared status table), ``RetryAfterSeconds``, ``UIDLocks``."""
    go("test", "./plugin/")
