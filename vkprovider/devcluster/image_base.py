"""The Dockerfile's ``PYTHON_IMAGE`` where no registry is reachable: Python 3.11 from Debian.

The Dockerfile's default base is the official ``python:3.11.x-slim-bookworm``, pinned by digest.
The dev machines reach Debian's mirrors and PyPI but no container registry, so ``make image``
builds a stand-in from the same distribution: a Debian bookworm root filesystem made by
``mmdebstrap`` with bookworm's ``python3`` (3.11), ``python3-venv``, ``python-is-python3`` (the
Dockerfile runs ``python``, as the official image names it), ``passwd`` (``groupadd``/``useradd``
of the runtime stage) and ``ca-certificates`` (TLS to the providers' APIs, as the official image
has it). mmdebstrap's ``merged-usr`` hook makes the merged-/usr layout itself and installs
``usr-is-merged``; without it apt satisfies ``init-system-helpers``' dependency with ``usrmerge``,
which brings 30 MB of Perl. It is imported as a local image tagged by the digest of its inputs (this package list
and the mmdebstrap command line), and reused while that tag exists.

What the tag does not capture: the mirror's content. Debian's security updates change the
packages behind the same inputs; the tag stays and the image is reused until deleted
(``python -m vkprovider.devcluster.image podman rmi <tag>``), then the next build takes the
updates. Differences from the official image: Debian's Python (3.11.2 plus Debian's security
patches, in ``/usr/bin``) instead of python.org's latest 3.11 patch release in ``/usr/local``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable

from vkprovider.devcluster.containers import ULIMITS, Engines, Unavailable, cache_root
from vkprovider.devcluster.process import StartupError

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python-is-python3", "passwd", "ca-certificates")
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
#: The files' times in the root filesystem (and in the image's layers, ``buildah --timestamp``):
#: 2026-01-01T00:00:00Z. A fixed time, so the same packages make the same bytes.
SOURCE_DATE_EPOCH = 1767225600
#: Image config of the imported root filesystem: what the official image sets too.
CHANGES = (
    "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV=LANG=C.UTF-8",
    'CMD ["python3"]',
)
REPOSITORY = "localhost/vkprovider-python"


def mmdebstrap_args() -> list[str]:
    """mmdebstrap's arguments before the output path: minbase plus PACKAGES, no recommends,
    no documentation but the copyright files."""
    return [
        "--variant=minbase",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        f"--include={','.join(PACKAGES)}",
        '--aptopt=APT::Install-Recommends "false"',
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=path-exclude=/usr/share/info/*",
        "--format=tar",
        SUITE,
    ]


def inputs_digest() -> str:
    """sha256 of everything that decides the base: the package list, mmdebstrap's arguments,
    the mirrors, the files' time and the image config."""
    inputs = {
        "packages": PACKAGES,
        "mmdebstrap": mmdebstrap_args(),
        "mirrors": MIRRORS,
        "source_date_epoch": SOURCE_DATE_EPOCH,
        "changes": CHANGES,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def tag() -> str:
    return f"{REPOSITORY}:3.11-{SUITE}-{inputs_digest()[:16]}"


def ensure(engines: Engines, log: Callable[[str], None]) -> str:
    """The base image's reference: reused if its tag exists, else built and imported.

    Unavailable when it cannot be made here (no mirror, mmdebstrap refused) or when podman
    cannot run a container from it (the probe every later step needs)."""
    ref = tag()
    if not engines.image_exists(ref):
        _build(engines, ref, log)
    _probe(engines, ref)
    return ref


def _build(engines: Engines, ref: str, log: Callable[[str], None]) -> None:
    workdir = cache_root() / "image"
    workdir.mkdir(parents=True, exist_ok=True)
    tarball = workdir / f"base-{inputs_digest()[:16]}.tar"
    logfile = workdir / f"base-{inputs_digest()[:16]}.log"
    log(f"image: building the base {ref} with mmdebstrap (log: {logfile})")
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)}
    with logfile.open("w") as out:
        done = subprocess.run(
            ["mmdebstrap", *mmdebstrap_args(), str(tarball), *MIRRORS],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        tarball.unlink(missing_ok=True)
        tail = logfile.read_text(errors="replace").strip().splitlines()[-3:]
        raise Unavailable(f"mmdebstrap could not make the base (exit {done.returncode}): {' | '.join(tail)}")
    try:
        changes = [arg for change in CHANGES for arg in ("--change", change)]
        engines.run(engines.podman("import", "--quiet", *changes, str(tarball), ref), "podman import")
    finally:
        tarball.unlink(missing_ok=True)


def _probe(engines: Engines, ref: str) -> None:
    """Run the base as the image will run: Python 3.11, as UID 10001, read-only root."""
    code = "import sys; print(sys.version_info[:2])"
    argv = engines.podman(
        "run", "--rm", *ULIMITS, "--user", "10001:10001", "--read-only", ref, "python", "-c", code
    )
    try:
        out = engines.run(argv, "podman run (the probe of the base)", timeout=120)
    except StartupError as exc:
        raise Unavailable(f"podman cannot run a container here: {exc}") from None
    if out.strip() != "(3, 11)":
        raise StartupError(f"{ref} runs Python {out.strip()}, not 3.11: check PACKAGES and SUITE")
