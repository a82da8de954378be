"""Build the local control plane's binaries from the Go module proxy, once per machine.

The binaries live outside the repository, under ``~/.cache/vkprovider/k8s/<version>/bin``.
Each binary is built into a temporary name, smoke-tested with ``--version`` and only then
renamed into place, so an interrupted build never leaves a half-built cache that looks whole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
STAGING_VERSION = "v0.36.3"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.7.0"
#: The descheduler release that matches Kubernetes 1.36; its k8s.io modules are raised to the
#: control plane's staging pins (v0.36.1 → STAGING_VERSION) so both speak the same API code.
DESCHEDULER_VERSION = "v0.36.0"
DESCHEDULER_STAGING = (
    "k8s.io/api",
    "k8s.io/apimachinery",
    "k8s.io/apiserver",
    "k8s.io/client-go",
    "k8s.io/component-base",
    "k8s.io/component-helpers",
    "k8s.io/metrics",
)

KUBE_COMMANDS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl")
ALL_BINARIES = (*KUBE_COMMANDS, "etcd", "kwok")  #: the control plane: ``Cluster.start`` needs these
#: Built by ``make cluster-build`` too, but only needed by what starts them (``Cluster.start_descheduler``).
EXTRA_BINARIES = ("descheduler", "kube-proxy", "kubelet")
#: Built from the same pinned tree as the control plane, in a module of its own (``src/<name>``)
#: so its build never rewrites the control plane's; started by ``devcluster.kube_proxy`` and
#: ``devcluster.kubelet_node``.
NODE_COMMANDS = ("kube-proxy", "kubelet")
#: How to ask each binary for its version, to prove a fresh build actually runs.
VERSION_ARGS: dict[str, list[str]] = {
    "kubectl": ["version", "--client"],
    "kwok": ["--version"],
    "descheduler": ["version"],
}


class BuildError(RuntimeError):
    """A build step failed; the message names the step and how to fix it."""


@dataclass(frozen=True)
class Toolchain:
    """Where the built binaries go and where the throwaway Go modules are written."""

    root: Path

    @classmethod
    def default(cls) -> Toolchain:
        base = os.environ.get("VKPROVIDER_CACHE") or str(Path.home() / ".cache" / "vkprovider")
        return cls(Path(base) / "k8s" / KUBERNETES_VERSION)

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def stamp(self, name: str) -> Path:
        return self.bin_dir / f".{name}.recipe"

    def missing(self, names: tuple[str, ...] = ALL_BINARIES) -> list[str]:
        """Binaries absent, or built by a different recipe (so changed flags force a rebuild)."""
        return [
            name
            for name in names
            if not os.access(self.binary(name), os.X_OK) or _read(self.stamp(name)) != _recipe(name)
        ]


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _ldflags(name: str) -> str:
    """Stamp the Kubernetes version into the binaries, as the upstream build does."""
    if name == "descheduler":
        return f"-s -w -X sigs.k8s.io/descheduler/pkg/version.version={DESCHEDULER_VERSION}"
    if name not in (*KUBE_COMMANDS, *NODE_COMMANDS):
        return "-s -w"
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    stamps = {
        "gitVersion": KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
    }
    flags = [
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in stamps.items()
    ]
    return " ".join(["-s", "-w", *flags])


def _recipe(name: str) -> str:
    version = {"etcd": ETCD_VERSION, "kwok": KWOK_VERSION}.get(name, KUBERNETES_VERSION)
    if name == "descheduler":
        version = f"{DESCHEDULER_VERSION} k8s.io={STAGING_VERSION}"
    return f"{name} {version} ldflags={_ldflags(name)}\n"


def _log(message: str) -> None:
    print(f"[devcluster build] {message}", file=sys.stderr, flush=True)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain was not found on PATH; install Go >= 1.26 "
            "(e.g. `apt-get install golang-go` or from the Go module proxy) and retry"
        )
    return go


def _run(args: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> str:
    """Run a go command, streaming a heartbeat so a long build is visibly alive."""
    _log(f"{what}: {' '.join(args)}")
    started = time.monotonic()
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(("go: downloading", "go: finding")):
            continue
        print(f"    {line.rstrip()}", file=sys.stderr, flush=True)
    code = proc.wait()
    elapsed = time.monotonic() - started
    if code != 0:
        tail = "".join(lines[-25:])
        hint = ""
        markers = (
            "proxy",
            "dial tcp",
            "404 not found",
            "410 gone",
            "403 forbidden",
            "module lookup disabled",
        )
        if any(marker in tail.lower() for marker in markers):
            hint = " (a module download was refused: check GOPROXY/network access to the Go module proxy)"
        raise BuildError(f"{what} failed after {elapsed:.0f}s with exit code {code}{hint}:\n{tail}")
    _log(f"{what}: done in {elapsed:.0f}s")
    return "".join(lines)


def _kubernetes_gomod(go: str, workdir: Path) -> str:
    out = _run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES_VERSION}"],
        workdir,
        "download k8s.io/kubernetes",
        env={"GOFLAGS": "-mod=mod"},
    )
    return Path(json.loads(out[out.index("{") :])["GoMod"]).read_text()


def _kubernetes_pins(go: str, workdir: Path, modules: tuple[str, ...]) -> list[str]:
    """Replace lines pinning ``modules`` to the versions k8s.io/kubernetes itself requires."""
    gomod = _kubernetes_gomod(go, workdir)
    pins = []
    for module in modules:
        found = re.search(rf"^\s*{re.escape(module)} (v\S+)", gomod, flags=re.MULTILINE)
        if found is None:
            raise BuildError(f"k8s.io/kubernetes {KUBERNETES_VERSION} does not require {module}")
        pins.append(f"\t{module} => {module} {found.group(1)}")
    return pins


def _staging_replaces(go: str, workdir: Path) -> list[str]:
    """Read k8s.io/kubernetes' own go.mod and pin each staging module to its published tag."""
    gomod = _kubernetes_gomod(go, workdir)
    modules = re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", gomod, flags=re.MULTILINE)
    if not modules:
        raise BuildError("could not find the staging replace lines in k8s.io/kubernetes' go.mod")
    return [f"\t{module} => {module} {STAGING_VERSION}" for module in modules]


def _write_module(
    path: Path, module: str, requires: list[str], replaces: list[str], imports: list[str]
) -> None:
    path.mkdir(parents=True, exist_ok=True)
    lines = [f"module {module}", "", "go 1.26", "", "require ("]
    lines += [f"\t{r}" for r in requires]
    lines.append(")")
    if replaces:
        lines += ["", "replace (", *replaces, ")"]
    (path / "go.mod").write_text("\n".join(lines) + "\n")
    tools = ["//go:build tools", "", "package tools", "", "import ("]
    tools += [f'\t_ "{imp}"' for imp in imports]
    tools.append(")")
    (path / "tools.go").write_text("\n".join(tools) + "\n")


def _install(go: str, workdir: Path, package: str, target: Path) -> None:
    """Build one binary to a temporary name, check it runs, then rename it into place."""
    tmp = target.with_name(f".{target.name}.partial")
    tmp.unlink(missing_ok=True)
    ldflags = f"-ldflags={_ldflags(target.name)}"
    _run([go, "build", "-trimpath", ldflags, "-o", str(tmp), package], workdir, f"build {target.name}")
    version_args = VERSION_ARGS.get(target.name, ["--version"])
    check = subprocess.run([str(tmp), *version_args], capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        raise BuildError(f"built {target.name} does not run: {check.stderr.strip()[:500]}")
    os.replace(tmp, target)
    stamp = target.with_name(f".{target.name}.recipe")
    stamp.write_text(_recipe(target.name))


def build(toolchain: Toolchain | None = None) -> Toolchain:
    """Build every missing binary; already-built ones are reused."""
    toolchain = toolchain or Toolchain.default()
    missing = toolchain.missing((*ALL_BINARIES, *EXTRA_BINARIES))
    if not missing:
        return toolchain
    go = _go()
    toolchain.bin_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _log(f"building {', '.join(missing)} into {toolchain.bin_dir} (first build takes several minutes)")
    env_flags = {"GOFLAGS": "-mod=mod"}

    kube = [name for name in missing if name in KUBE_COMMANDS]
    if kube:
        workdir = toolchain.root / "src" / "kubernetes"
        workdir.mkdir(parents=True, exist_ok=True)
        replaces = _staging_replaces(go, workdir)
        packages = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBE_COMMANDS]
        _write_module(
            workdir,
            "vkprovider.local/kubernetes",
            [f"k8s.io/kubernetes {KUBERNETES_VERSION}"],
            replaces,
            packages,
        )
        _run([go, "mod", "tidy"], workdir, "resolve kubernetes modules", env=env_flags)
        for name in kube:
            _install(go, workdir, f"k8s.io/kubernetes/cmd/{name}", toolchain.binary(name))

    if "etcd" in missing:
        workdir = toolchain.root / "src" / "etcd"
        _write_module(workdir, "vkprovider.local/etcd", [f"go.etcd.io/etcd/server/v3 {ETCD_VERSION}"], [], [])
        (workdir / "tools.go").unlink()
        (workdir / "main.go").write_text(
            'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\n'
            "func main() { etcdmain.Main(os.Args) }\n"
        )
        _run([go, "mod", "tidy"], workdir, "resolve etcd modules", env=env_flags)
        _install(go, workdir, ".", toolchain.binary("etcd"))

    if "kwok" in missing:
        workdir = toolchain.root / "src" / "kwok"
        _write_module(
            workdir,
            "vkprovider.local/kwok",
            [f"sigs.k8s.io/kwok {KWOK_VERSION}"],
            [],
            ["sigs.k8s.io/kwok/cmd/kwok"],
        )
        _run([go, "mod", "tidy"], workdir, "resolve kwok modules", env=env_flags)
        _install(go, workdir, "sigs.k8s.io/kwok/cmd/kwok", toolchain.binary("kwok"))

    for name in (n for n in NODE_COMMANDS if n in missing):
        workdir = toolchain.root / "src" / name
        workdir.mkdir(parents=True, exist_ok=True)
        package = f"k8s.io/kubernetes/cmd/{name}"
        _write_module(
            workdir,
            f"vkprovider.local/{name}",
            [f"k8s.io/kubernetes {KUBERNETES_VERSION}"],
            _staging_replaces(go, workdir),
            [package],
        )
        _run([go, "mod", "tidy"], workdir, f"resolve {name} modules", env=env_flags)
        _install(go, workdir, package, toolchain.binary(name))

    if "descheduler" in missing:
        workdir = toolchain.root / "src" / "descheduler"
        workdir.mkdir(parents=True, exist_ok=True)
        _write_module(
            workdir,
            "vkprovider.local/descheduler",
            [
                f"sigs.k8s.io/descheduler {DESCHEDULER_VERSION}",
                *(f"{module} {STAGING_VERSION}" for module in DESCHEDULER_STAGING),
            ],
            # descheduler v0.36.0 asks for kube-openapi v0.31.0, which the module proxy does not
            # serve; the control plane's own pin (a pseudo-version) is the same code line.
            _kubernetes_pins(go, workdir, ("k8s.io/kube-openapi",)),
            ["sigs.k8s.io/descheduler/cmd/descheduler"],
        )
        _run([go, "mod", "tidy"], workdir, "resolve descheduler modules", env=env_flags)
        _install(go, workdir, "sigs.k8s.io/descheduler/cmd/descheduler", toolchain.binary("descheduler"))

    _log(f"all binaries ready in {time.monotonic() - started:.0f}s")
    return toolchain


def main() -> int:
    try:
        toolchain = build()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(toolchain.bin_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
