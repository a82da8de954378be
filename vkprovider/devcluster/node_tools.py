"""What the real kubelet node needs besides the kubelet: crictl and a pod sandbox ("pause") image.

No registry is reachable from the machines this runs on, so containerd cannot pull the usual
``registry.k8s.io/pause``. The sandbox image is made here instead: a static Go program that
waits for SIGTERM (all a sandbox's process does: hold the pod's namespaces), in an OCI image
archive written byte for byte by :func:`pause_archive` (one uncompressed layer, fixed
timestamps: the same digest on every machine), imported with ``ctr images import``.

``crictl`` (sigs.k8s.io/cri-tools, from the Go module proxy) stops and removes the node's pod
sandboxes through the CRI when the node stops, so containerd tears down each pod's network
namespace itself. Both land under ``~/.cache/vkprovider/kubelet-node`` through a temporary
name, like the control plane's binaries (:mod:`vkprovider.devcluster.build`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from vkprovider.devcluster.build import BuildError, _go, _read, _run, _write_module

CRI_TOOLS_VERSION = "v1.37.0"
#: The sandbox image's name in containerd (``sandbox_image`` of its CRI config).
PAUSE_IMAGE = "localhost/vkprovider-pause:1"
_PAUSE_SOURCE = """// pause: a pod sandbox's process; it holds the pod's namespaces until SIGTERM/SIGINT.
package main

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tsignals := make(chan os.Signal, 1)
\tsignal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
\t<-signals
}
"""


def tools_root() -> Path:
    base = os.environ.get("VKPROVIDER_CACHE") or str(Path.home() / ".cache" / "vkprovider")
    return Path(base) / "kubelet-node"


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One build at a time on this machine (``make test``'s workers, a second shell): the
    temporary names below are shared."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_crictl(root: Path | None = None) -> Path:
    """``crictl`` of cri-tools ``CRI_TOOLS_VERSION``, built once (static, no cgo)."""
    root = root or tools_root()
    with _locked(root):
        return _build_crictl(root)


def _build_crictl(root: Path) -> Path:
    binary, stamp = root / "bin" / "crictl", root / "bin" / ".crictl.recipe"
    recipe = f"crictl {CRI_TOOLS_VERSION}\n"
    if os.access(binary, os.X_OK) and _read(stamp) == recipe:
        return binary
    go = _go()
    workdir = root / "src" / "crictl"
    package = "sigs.k8s.io/cri-tools/cmd/crictl"
    _write_module(
        workdir, "vkprovider.local/crictl", [f"sigs.k8s.io/cri-tools {CRI_TOOLS_VERSION}"], [], [package]
    )
    env = {"GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    _run([go, "mod", "tidy"], workdir, "resolve cri-tools modules", env=env)
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(".crictl.partial")
    _run(
        [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(tmp), package],
        workdir,
        "build crictl",
        env=env,
    )
    check = subprocess.run([str(tmp), "--version"], capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        raise BuildError(f"built crictl does not run: {check.stderr.strip()[:500]}")
    os.replace(tmp, binary)
    stamp.write_text(recipe)
    return binary


def _build_pause(target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="vkp-pause-") as tmp:
        (Path(tmp) / "go.mod").write_text("module vkprovider.local/pause\n\ngo 1.26\n")
        (Path(tmp) / "main.go").write_text(_PAUSE_SOURCE)
        env = {"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
        _run(
            [_go(), "build", "-trimpath", "-ldflags=-s -w", "-o", str(target), "."],
            Path(tmp),
            "build pause",
            env=env,
        )


def _blob(tar: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    _add(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}", len(data)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def oci_archive(binary: bytes, ref: str) -> bytes:
    """An OCI image layout (as a tar) of one layer holding ``/pause``, run as 65535."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        _add(layer, "pause", binary, mode=0o755)
    layer_bytes = layer_buf.getvalue()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        layer_digest, layer_size = _blob(tar, layer_bytes)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
        config_digest, config_size = _blob(tar, _json(config))
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config_size,
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": layer_size,
                }
            ],
        }
        manifest_digest, manifest_size = _blob(tar, _json(manifest))
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": manifest_size,
                    "annotations": {
                        "io.containerd.image.name": ref,
                        "org.opencontainers.image.ref.name": ref,
                    },
                }
            ],
        }
        _add(tar, "index.json", _json(index))
    return out.getvalue()


def pause_archive(root: Path | None = None) -> Path:
    """The sandbox image as an OCI archive for ``ctr images import``; built once."""
    root = root or tools_root()
    with _locked(root):
        return _pause_archive(root)


def _pause_archive(root: Path) -> Path:
    recipe = hashlib.sha256(f"{_PAUSE_SOURCE}{PAUSE_IMAGE}".encode()).hexdigest()[:12]
    archive = root / "images" / f"pause-{recipe}.oci.tar"
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    binary = root / "bin" / "pause"
    binary.parent.mkdir(parents=True, exist_ok=True)
    _build_pause(binary)
    tmp = archive.with_name(f".{archive.name}.partial")
    tmp.write_bytes(oci_archive(binary.read_bytes(), PAUSE_IMAGE))
    os.replace(tmp, archive)
    return archive
