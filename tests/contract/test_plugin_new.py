"""``vkprovider plugin new``: the generated package, installed into a fresh venv next to
vkprovider (built from this checkout, not editable), passes the contract suite through the
pytest plugin; with its identity mapping broken (so the kit's find-before-create finds nothing)
it fails the concurrent-first-deploy test; and
``mypy --strict`` on it, from outside the repo, finds the typed plugin API of the editable dev
install.

By default the fresh venv borrows the *dependencies* (grpcio, fastapi, ...) from the pinned dev
environment through a ``.pth`` path entry and installs vkprovider and the generated package
with ``--no-deps``: installing every dependency from the pip cache takes minutes on this machine.
``VKPROVIDER_FULL_VENV=1`` installs everything into the venv instead (pip cache, PyPI only).
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from vkprovider.cli import main
from vkprovider.cli.plugin_new import generate

REPO = Path(__file__).resolve().parents[2]
#: The generated adapter's reading of its labels; the kit finds existing deployments through it.
IDENTITY_LINE = "        if not isinstance(labels, dict) or LABEL_POD_UID not in labels:"


def run(*command: str | Path, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def checked(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"{result.args}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with vkprovider installed from this checkout (a wheel build, not editable)."""
    venv = tmp_path_factory.mktemp("venv")
    checked(run(sys.executable, "-m", "venv", venv, cwd=venv))
    python = venv / "bin" / "python"
    pip = [python, "-m", "pip", "install", "-q", "-c", REPO / "requirements.lock"]
    if os.environ.get("VKPROVIDER_FULL_VENV") == "1":
        checked(run(*pip, f"{REPO}[contract]", cwd=venv))
    else:
        purelib = checked(
            run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=venv)
        )
        checked(run(*pip, "setuptools", cwd=venv))  # the venv's own build backend, at the pinned version
        Path(purelib.stdout.strip(), "_borrowed_deps.pth").write_text(site.getsitepackages()[0] + "\n")
        checked(run(*pip, "--no-deps", "--no-build-isolation", REPO, cwd=venv))
    where = checked(run(python, "-c", "import vkprovider; print(vkprovider.__file__)", cwd=venv))
    assert where.stdout.startswith(str(venv)), where.stdout  # the venv's own copy, not the checkout
    return python


def new_package(tmp_path: Path, python: Path) -> Path:
    package = tmp_path / "vkprovider-acme-gpu"
    assert main(["plugin", "new", "acme-gpu", "--out", str(package)]) == 0
    deps = [] if os.environ.get("VKPROVIDER_FULL_VENV") == "1" else ["--no-deps", "--no-build-isolation"]
    target = str(package) if deps else f"{package}[test]"
    checked(
        run(
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "-c",
            REPO / "requirements.lock",
            *deps,
            "-e",
            target,
            cwd=tmp_path,
        )
    )
    return package


def test_a_generated_package_passes_the_suite_and_fails_it_without_its_identity(
    fresh_venv: Path, tmp_path: Path
) -> None:
    package = new_package(tmp_path, fresh_venv)
    result = checked(run(fresh_venv, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package))
    passed = int(re.search(r"(\d+) passed", result.stdout).group(1))  # type: ignore[union-attr]
    assert passed >= 50 and "failed" not in result.stdout, result.stdout[-2000:]

    adapter = package / "vkprovider_acme_gpu" / "adapter.py"  # an editable install: edits take effect
    source = adapter.read_text()
    assert IDENTITY_LINE in source
    adapter.write_text(source.replace(IDENTITY_LINE, "        if True:  # broken: never recognises its own"))
    result = run(
        fresh_venv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "concurrent_first", cwd=package
    )
    assert result.returncode == 1, result.stdout[-4000:]
    assert "concurrent first deploys of one UID made" in result.stdout


@pytest.mark.skipif(
    shutil.which("mypy", path=str(Path(sys.executable).parent)) is None, reason="mypy not installed"
)
def test_mypy_strict_on_a_generated_adapter_outside_the_repo(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    generate("acme-gpu", package)
    mypy = Path(sys.executable).parent / "mypy"
    result = run(mypy, "--strict", "--cache-dir", tmp_path / "cache", "vkprovider_acme_gpu", cwd=package)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_bad_name_or_a_used_directory_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "new", "Acme_GPU", "--out", str(tmp_path / "x")]) == 2
    assert "plugin name 'Acme_GPU'" in capsys.readouterr().err
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("")
    assert main(["plugin", "new", "acme", "--out", str(tmp_path / "used")]) == 2
    assert "not empty" in capsys.readouterr().err
