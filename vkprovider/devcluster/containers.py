"""podman and buildah as this machine kind runs them, with their store under the cache.

What the dev machines need, and why each flag is there:

* ``--runtime runc`` and ``--cgroup-manager cgroupfs``: the machines have hybrid cgroups and no
  systemd manager to talk to; crun (Debian's default for podman) refuses the hybrid hierarchy.
* ``--ulimit nofile=1024:1024 --ulimit nproc=4096:4096`` on every container: the OCI runtime
  would otherwise *raise* the limits to the engines' defaults, which is not permitted here.
* ``--root``/``--runroot``/``--tmpdir`` under ``~/.cache/vkprovider/containers`` (or
  ``$VKPROVIDER_CACHE``) and ``/run/vkprovider``: the images, the build's layer cache and the
  containers of the tooling live apart from the machine's own container store and never in the
  repository; ``rm -rf ~/.cache/vkprovider/containers`` forgets them all.
* ``--events-backend file``: no journald to log podman's events to.

By hand, the same store: ``python -m vkprovider.devcluster.image podman images`` (or
``… buildah images``) runs the engine with exactly these flags.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vkprovider.devcluster import apt
from vkprovider.devcluster.process import StartupError

#: binary → Debian package: the engines, the OCI runtime they are told to use, and the tool that
#: makes the base image from Debian's archive when no registry is reachable.
TOOLS = {"podman": "podman", "buildah": "buildah", "runc": "runc", "mmdebstrap": "mmdebstrap"}
#: rlimits every container and build step gets, set (not raised): see the module docstring.
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096")
RUNTIME = "runc"
CGROUP_MANAGER = "cgroupfs"


class Unavailable(RuntimeError):
    """Containers cannot be built or run on this machine; the message says why (a skip reason)."""


def cache_root() -> Path:
    return Path(os.environ.get("VKPROVIDER_CACHE") or Path.home() / ".cache" / "vkprovider")


@dataclass(frozen=True)
class Engines:
    """The podman and buildah command lines sharing one container store."""

    root: Path
    runroot: Path
    tmpdir: Path

    @classmethod
    def default(cls) -> Engines:
        return cls(
            root=cache_root() / "containers" / "storage",
            runroot=Path("/run/vkprovider/containers"),
            tmpdir=Path("/run/vkprovider/libpod"),
        )

    def podman(self, *args: str) -> list[str]:
        return [
            "podman",
            "--root",
            str(self.root),
            "--runroot",
            str(self.runroot),
            "--tmpdir",
            str(self.tmpdir),
            "--cgroup-manager",
            CGROUP_MANAGER,
            "--runtime",
            RUNTIME,
            "--events-backend",
            "file",
            *args,
        ]

    def buildah(self, *args: str) -> list[str]:
        return [
            "buildah",
            "--root",
            str(self.root),
            "--runroot",
            str(self.runroot),
            "--cgroup-manager",
            CGROUP_MANAGER,
            *args,
        ]

    def run(self, argv: Sequence[str], what: str, *, timeout: float = 600) -> str:
        """Run an engine command line; its stdout, or StartupError saying ``what`` failed and why."""
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise StartupError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
        return done.stdout

    def image_exists(self, ref: str) -> bool:
        return subprocess.run(self.podman("image", "exists", ref), check=False).returncode == 0


def ensure_tools() -> None:
    """Install podman, buildah, runc and mmdebstrap from Debian where missing; Unavailable if
    that is not possible here (not root, no apt-get)."""
    if os.geteuid() != 0:
        raise Unavailable(
            "building and running the image here needs root (mmdebstrap, rootful podman/buildah with runc)"
        )
    try:
        apt.install(TOOLS)
    except (StartupError, subprocess.CalledProcessError) as exc:
        raise Unavailable(f"cannot install {', '.join(apt.missing(TOOLS))}: {exc}") from None
