"""Fail the image build if the runtime environment strays from the image's lock.

The Dockerfile installs requirements-image.lock (the runtime dependencies of pyproject.toml at
the pins of requirements.lock, with hashes) with `pip install --require-hashes --no-deps`, then
the project itself with `--no-deps`. Hashes make each file the one that was locked; this check
makes the set of distributions the locked one: every installed distribution (the project and
the venv's installers aside) must be in the lock, at the locked version, so nothing unpinned
reaches the image — whichever way it got in (a base image's extra, a changed install step).

Usage: python verify-runtime.py requirements-image.lock
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

PROJECT = {"vkprovider"}  # the project itself (not in its own lock)
TOOLING = {"pip", "setuptools", "wheel"}  # the venv's installers, not imported at runtime


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(path: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in open(path, encoding="utf-8"):
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def main(lock_path: str) -> int:
    pins = locked(lock_path)
    problems = []
    installed = sorted((canonical(d.metadata["Name"]), d.version) for d in metadata.distributions())
    for name, version in installed:
        if name in PROJECT or name in TOOLING:
            continue
        if name not in pins:
            problems.append(f"{name}=={version} is installed but not in {lock_path}")
        elif pins[name] != version:
            problems.append(f"{name}=={version} is installed; {lock_path} pins {pins[name]}")
    for line in problems:
        print(f"verify-runtime: {line}", file=sys.stderr)
    runtime = len(installed) - sum(1 for n, _ in installed if n in PROJECT or n in TOOLING)
    print(f"verify-runtime: {runtime} runtime distributions, all pinned by {lock_path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "requirements-image.lock"))
