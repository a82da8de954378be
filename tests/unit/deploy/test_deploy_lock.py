"""The two locks: requirements.lock (every pin; pip's constraints for `make install`) and
requirements-image.lock (the image's runtime dependencies, hashed, for `--require-hashes`).

`make lock` makes both from pyproject.toml, the second constrained by the first; these tests
check the result holds together without re-resolving (no network): same pins, every pin hashed,
and the image's set closed under the runtime dependencies, as `pip install --no-deps` needs."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.deploy.rendering import ROOT

FULL = ROOT / "requirements.lock"
IMAGE = ROOT / "requirements-image.lock"
#: The image's build backend (deploy/image/build-backend.in), not a runtime dependency.
BUILD_BACKEND = {"setuptools"}


def requirements(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip requirements file (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    found: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(.*)$", line)
        if match:
            hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", match.group(3))
            found[canonicalize_name(match.group(1))] = (match.group(2), hashes)
    return found


def runtime_closure() -> set[str]:
    """The distributions `pip install .` needs: the project's own requirements (no extras), and
    theirs, read from the installed metadata of this venv (pinned by requirements.lock)."""
    env = {k: str(v) for k, v in default_environment().items()}
    todo = [Requirement(r) for r in metadata.requires("vkprovider") or []]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        todo.extend(Requirement(r) for r in metadata.requires(name) or [])
    return seen


def test_the_image_lock_pins_what_requirements_lock_pins() -> None:
    full, image = requirements(FULL), requirements(IMAGE)
    assert image, "requirements-image.lock has no pins"
    differ = {
        n: (v, full.get(n, ("missing", []))[0]) for n, (v, _) in image.items() if full.get(n, ("",))[0] != v
    }
    assert not differ, f"requirements-image.lock disagrees with requirements.lock (image, full): {differ}"


def test_every_pin_of_the_image_lock_is_hashed() -> None:
    unhashed = [name for name, (_, hashes) in requirements(IMAGE).items() if not hashes]
    assert not unhashed, f"--require-hashes would refuse: {unhashed}"


def test_requirements_lock_stays_a_constraints_file() -> None:
    """pip turns on --require-hashes for everything once a constraints file has a hash, and the
    editable project of `make install` has none: the full lock must stay without hashes."""
    assert "--hash=" not in FULL.read_text()


def test_the_image_lock_is_exactly_the_runtime_closure() -> None:
    image = set(requirements(IMAGE))
    closure = runtime_closure()
    assert closure - image == set(), "a runtime dependency is missing: --no-deps would leave it out"
    assert image - closure - BUILD_BACKEND == set(), "a test/dev tool would ship in the image"


def test_make_lock_makes_both_from_one_resolution() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\nlock:") :].split("\n\n")[0]
    commands = {}
    for lock in (FULL, IMAGE):
        header = re.search(r"^#\s+(uv pip compile .*)$", lock.read_text(), re.M)
        assert header, f"{lock.name} was not written by uv"
        assert header.group(1) in recipe, f"{lock.name} was made by another command than `make lock`"
        commands[lock] = header.group(1).split()
    assert ["-c", FULL.name] == commands[IMAGE][commands[IMAGE].index("-c") :][:2], "not constrained"
    assert "--generate-hashes" in commands[IMAGE] and "--generate-hashes" not in commands[FULL]
