"""Build Kueue's manager from the Go module proxy, once per machine, at a pinned version.

Kueue lives in its own throwaway Go module with Kueue's own requirements (its k8s.io modules
are a minor behind the control plane's pins; it only talks to the apiserver over HTTP, so its
client libraries need not match). The binary goes to ``~/.cache/vkprovider/kueue/<version>/bin``
through a temporary name and a smoke test, with a recipe stamp, like the control plane's.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vkprovider.devcluster.build import BuildError, _go, _log, _read, _run, _write_module

KUEUE_VERSION = "v0.17.0"
KUEUE_MODULE = "sigs.k8s.io/kueue"
_LDFLAGS = f"-s -w -X {KUEUE_MODULE}/pkg/version.GitVersion={KUEUE_VERSION}"
RECIPE = f"kueue {KUEUE_VERSION} ldflags={_LDFLAGS}\n"


@dataclass(frozen=True)
class KueueToolchain:
    root: Path

    @classmethod
    def default(cls) -> KueueToolchain:
        base = os.environ.get("VKPROVIDER_CACHE") or str(Path.home() / ".cache" / "vkprovider")
        return cls(Path(base) / "kueue" / KUEUE_VERSION)

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "kueue"

    @property
    def stamp(self) -> Path:
        return self.root / "bin" / ".kueue.recipe"

    @property
    def workdir(self) -> Path:
        return self.root / "src"

    def missing(self) -> bool:
        return not os.access(self.binary, os.X_OK) or _read(self.stamp) != RECIPE

    def module_dir(self) -> Path:
        """Kueue's module source in the Go module cache (its CRD YAML is read from there)."""
        return go_module_dir(KUEUE_MODULE, KUEUE_VERSION)


def go_module_dir(module: str, version: str) -> Path:
    """Where a module's source sits in the Go module cache (downloaded from the proxy if absent)."""
    done = subprocess.run(
        [_go(), "mod", "download", "-json", f"{module}@{version}"],
        cwd=Path.home(),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    try:
        return Path(json.loads(done.stdout)["Dir"])
    except (ValueError, KeyError):
        raise BuildError(
            f"could not fetch {module}@{version} from the Go module proxy: {(done.stderr or done.stdout)[-500:]}"
        ) from None


def build_kueue(toolchain: KueueToolchain | None = None) -> KueueToolchain:
    toolchain = toolchain or KueueToolchain.default()
    if not toolchain.missing():
        return toolchain
    go = _go()
    toolchain.binary.parent.mkdir(parents=True, exist_ok=True)
    package = f"{KUEUE_MODULE}/cmd/kueue"
    _log(f"building kueue {KUEUE_VERSION} into {toolchain.binary} (several minutes on a small machine)")
    _write_module(
        toolchain.workdir, "vkprovider.local/kueue", [f"{KUEUE_MODULE} {KUEUE_VERSION}"], [], [package]
    )
    env = {"GOFLAGS": "-mod=mod"}
    _run([go, "mod", "tidy"], toolchain.workdir, "resolve kueue modules", env=env)
    tmp = toolchain.binary.with_name(".kueue.partial")
    tmp.unlink(missing_ok=True)
    _run(
        [go, "build", "-trimpath", f"-ldflags={_LDFLAGS}", "-o", str(tmp), package],
        toolchain.workdir,
        "build kueue",
        env=env,
    )
    check = subprocess.run([str(tmp), "--help"], capture_output=True, text=True, timeout=60)
    if "-config" not in check.stderr + check.stdout:
        raise BuildError(f"built kueue does not run: {(check.stderr or check.stdout).strip()[:500]}")
    os.replace(tmp, toolchain.binary)
    toolchain.stamp.write_text(RECIPE)
    return toolchain
