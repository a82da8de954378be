"""Install Debian packages for the dev tooling, only where their binaries are missing.

``make prometheus`` and ``make image`` install what they need themselves, so that ``.ci/run`` on
a clean machine needs nothing beforehand. Debian's packages may start system services on
install (Prometheus, podman's socket); the install runs with a ``policy-rc.d`` that refuses
service starts (created for the install and removed after, if the machine had none), and the
tooling never relies on such a service: it runs its own processes, stopped by PID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from vkprovider.devcluster.process import StartupError

POLICY_RC = Path("/usr/sbin/policy-rc.d")
_DENY_STARTS = "#!/bin/sh\n# vkprovider: no service starts during this install\nexit 101\n"


def missing(binaries: Mapping[str, str]) -> list[str]:
    """The packages of ``binaries`` (binary name → Debian package) whose binary is not on PATH."""
    return sorted({package for binary, package in binaries.items() if shutil.which(binary) is None})


def install(binaries: Mapping[str, str]) -> None:
    """Install the Debian packages whose binaries are missing (binary name → package).

    Raises StartupError naming what is missing when apt-get is not available, or when the
    packages install but a binary is still not on PATH."""
    packages = missing(binaries)
    if not packages:
        return
    if shutil.which("apt-get") is None:
        raise StartupError(f"{', '.join(packages)} not installed and apt-get is not available; install them")
    created = not POLICY_RC.exists()
    if created:
        POLICY_RC.write_text(_DENY_STARTS)
        POLICY_RC.chmod(0o755)
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
            subprocess.run(cmd, env=env, check=True)
    finally:
        if created:
            POLICY_RC.unlink(missing_ok=True)
    still = missing(binaries)
    if still:
        raise StartupError(f"apt-get installed {', '.join(still)} but their binaries are not on PATH")
