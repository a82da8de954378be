"""``make image``: the shipped Dockerfile built with buildah on a machine with no registry.

``python -m vkprovider.devcluster.image build`` installs podman, buildah, runc and mmdebstrap
from Debian where missing (``devcluster.containers``), makes the base the Dockerfile's
``PYTHON_IMAGE`` points at (``devcluster.image_base``: Python 3.11 from Debian's archive, as no
registry is reachable), then runs ``buildah bud`` on the repository's own ``Dockerfile`` — the
one a registry build uses, with only the base swapped by build argument — and prints the
image's size, layers and package lists.

How it builds, and why:

* ``--layers``: buildah's layer cache (in the cache's container store) reuses every step whose
  inputs did not change, so ``make test`` rebuilds nothing when nothing changed, and only the
  project's layer when only the sources changed.
* ``--timestamp`` and ``--build-arg SOURCE_DATE_EPOCH`` (image_base.SOURCE_DATE_EPOCH): the
  files' times in the layers, the image's creation time and ``useradd``'s password-change day
  are fixed, so two builds of the same inputs make the same layers (``reproduce`` checks it).
* ``--network host``: pip reaches PyPI from the build's RUN steps without a bridge network (no
  iptables rules, no new addresses on the machine).
* The host's CA bundle (the file ``PIP_CERT``, ``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE``
  names, else the system's) is bind-mounted, read-only, at ``/etc/ssl/certs/ca-certificates.crt``
  for the RUN steps: the dev machines reach PyPI through a TLS-inspecting egress proxy whose CA
  the host trusts, and Debian's pip trusts that file. A bind mount is not part of any layer:
  the image ships Debian's own bundle.
* The image is tagged ``localhost/vkprovider:<version>``, the name and tag deploy/base's
  kustomization sets.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from vkprovider.devcluster import image_base
from vkprovider.devcluster.containers import RUNTIME, ULIMITS, Engines, Unavailable, cache_root, ensure_tools
from vkprovider.devcluster.process import StartupError

ROOT = Path(__file__).resolve().parents[2]
NAME, VERSION = "localhost/vkprovider", "0.1.0"
IMAGE = f"{NAME}:{VERSION}"
#: The Dockerfile's build stage, tagged so that pruning keeps its layer cache (see _prune).
BUILD_STAGE = f"{NAME}-build:cache"
#: Where the host may name the CA bundle its TLS clients trust (first existing file wins).
CA_BUNDLE_ENV = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
CA_BUNDLE_IN_IMAGE = "/etc/ssl/certs/ca-certificates.crt"
HOST_CA_BUNDLE = Path(CA_BUNDLE_IN_IMAGE)

Log = Callable[[str], None]


def build_log(name: str = "build") -> Path:
    return cache_root() / "image" / f"{name}.log"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Built:
    ref: str
    image_id: str
    base: str
    size: int
    layers: list[str]
    seconds: float
    also: tuple[str, ...] = ()


def ca_bundle() -> Path | None:
    """The CA bundle the host's TLS clients trust: the first file the environment names, else
    the system's (Debian's, with any local CA ``update-ca-certificates`` added), else None."""
    for name in CA_BUNDLE_ENV:
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return HOST_CA_BUNDLE if HOST_CA_BUNDLE.is_file() else None


def bud_args(
    base: str,
    tag: str,
    *,
    root: Path = ROOT,
    no_cache: bool = False,
    pull: bool = False,
    target: str | None = None,
) -> list[str]:
    """``buildah bud``'s arguments for the Dockerfile at ``root`` on ``base``, tagged ``tag``
    (``pull``: the base comes from a registry, pulled if missing; else it must be local;
    ``target``: only up to that stage)."""
    epoch = str(image_base.SOURCE_DATE_EPOCH)
    bundle = ca_bundle()
    return [
        "bud",
        "--runtime",
        RUNTIME,
        *ULIMITS,
        "--network",
        "host",
        "--pull=missing" if pull else "--pull=never",
        "--layers",
        "--force-rm",  # a failed step leaves no working container behind
        *(["--no-cache"] if no_cache else []),
        "--timestamp",
        epoch,
        "--build-arg",
        f"SOURCE_DATE_EPOCH={epoch}",
        "--build-arg",
        f"PYTHON_IMAGE={base}",
        *(["--volume", f"{bundle}:{CA_BUNDLE_IN_IMAGE}:ro"] if bundle else []),
        *(["--target", target] if target else []),
        "--file",
        str(root / "Dockerfile"),
        "--tag",
        tag,
        str(root),
    ]


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One build at a time on this machine (``make test``'s workers, a second shell)."""
    directory = cache_root() / "image"
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def inspect(engines: Engines, ref: str) -> tuple[str, int, list[str]]:
    """(image ID, size in bytes, layer digests) of a local image."""
    out = engines.run(engines.podman("image", "inspect", ref), f"podman image inspect {ref}")
    (found,) = json.loads(out)
    return str(found["Id"]), int(found["Size"]), [str(d) for d in found["RootFS"]["Layers"]]


def build(
    engines: Engines | None = None,
    *,
    tag: str = IMAGE,
    also: tuple[str, ...] = (),
    base: str | None = None,
    no_cache: bool = False,
    log: Log = _stderr,
) -> Built:
    """Build the Dockerfile, tagged ``tag`` and every name in ``also``, on ``base`` (a registry
    image, pulled if missing) or, by default, on the Debian base (made first if missing).
    StartupError if the build fails, Unavailable if containers cannot be built or run here."""
    engines = engines or Engines.default()
    ensure_tools()
    with _locked():
        pull = base is not None
        base = base or image_base.ensure(engines, log)
        before = inspect(engines, tag)[0] if engines.image_exists(tag) else None
        started = time.monotonic()
        log(f"image: buildah bud Dockerfile (PYTHON_IMAGE={base}) → {tag} (log: {build_log()})")
        _bud(engines, bud_args(base, tag, no_cache=no_cache, pull=pull))
        seconds = time.monotonic() - started
        if also:
            engines.run(engines.podman("tag", tag, *also), f"podman tag {tag} {' '.join(also)}")
        image_id, size, layers = inspect(engines, tag)
        if image_id != before and tag == IMAGE:
            _prune(engines, base, pull)
    return Built(tag, image_id, base, size, layers, seconds, also)


def _bud(engines: Engines, args: list[str], logfile: Path | None = None) -> None:
    logfile = logfile or build_log()
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with logfile.open("w") as out:
        done = subprocess.run(engines.buildah(*args), stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-15:])
        raise StartupError(f"buildah bud failed (exit {done.returncode}); log {logfile}:\n{tail}")


def _prune(engines: Engines, base: str, pull: bool) -> None:
    """Drop what earlier builds left (their images and layers: ~0.4 GB a source change), keeping
    the layer cache of this one. The build stage is tagged first (every step cached, seconds):
    a tagged image's parent images are not pruned, so the next build still reuses the
    dependency layer instead of downloading every wheel again."""
    _bud(engines, bud_args(base, BUILD_STAGE, pull=pull, target="build"), build_log("build-stage"))
    engines.run(engines.podman("image", "prune", "--force"), "podman image prune")


def ensure(log: Log = _stderr) -> str:
    """The image, built or reused from the layer cache (what the image tests run)."""
    return build(log=log).ref


_PYTHON_DISTS = (
    "import importlib.metadata as m; "
    "print('\\n'.join(sorted(f\"{d.metadata['Name']}=={d.version}\" for d in m.distributions())))"
)


def packages(engines: Engines, ref: str) -> tuple[list[str], list[str]]:
    """(Python distributions of the image's venv, Debian packages of its base), as name==version."""

    def listed(entrypoint: str, *args: str) -> list[str]:
        run = ("run", "--rm", *ULIMITS, "--network", "none", "--read-only", "--entrypoint", entrypoint)
        argv = engines.podman(*run, ref, *args)
        return sorted(engines.run(argv, f"listing the packages of {ref}", timeout=120).split())

    python = listed("/opt/vkprovider/bin/python", "-c", _PYTHON_DISTS)
    debian = listed("dpkg-query", "-W", "-f", "${Package}==${Version}\\n")
    return python, debian


def report(engines: Engines, built: Built) -> list[str]:
    python, debian = packages(engines, built.ref)
    _, base_size, _ = inspect(engines, built.base)
    return [
        f"image: {' '.join((built.ref, *built.also))} {built.image_id[:12]} built in {built.seconds:.1f}s "
        f"on {built.base}",
        f"image: size {built.size / 1e6:.0f} MB (base {base_size / 1e6:.0f} MB)",
        f"image: layers {' '.join(built.layers)}",
        f"image: python distributions ({len(python)}): {' '.join(python)}",
        f"image: debian packages ({len(debian)}): {' '.join(debian)}",
    ]


def reproduce(engines: Engines, log: Log = _stderr) -> tuple[bool, list[str]]:
    """Build the image again from scratch (``--no-cache``) and compare its layers with IMAGE's.

    Returns (same, lines): on a difference, the lines name the paths that differ."""
    first = build(engines, log=log)
    second = build(engines, tag=f"{NAME}:rebuild", no_cache=True, log=log)
    lines = [
        f"reproduce: {first.ref} image {first.image_id[:12]} layers {' '.join(first.layers)}",
        f"reproduce: {second.ref} (--no-cache, {second.seconds:.0f}s) image {second.image_id[:12]} "
        f"layers {' '.join(second.layers)}",
    ]
    same = first.layers == second.layers
    if same:
        config = (
            "and the same image ID" if first.image_id == second.image_id else "(image IDs differ: config)"
        )
        lines.append(f"reproduce: the same {len(first.layers)} layers {config}")
    else:
        diff = engines.run(engines.podman("image", "diff", first.ref, second.ref), "podman image diff")
        changed = [line for line in diff.splitlines() if line.strip()]
        lines.append(f"reproduce: the layers differ; {len(changed)} paths differ, e.g.:")
        lines += [f"  {line}" for line in changed[:40]]
    engines.run(engines.podman("rmi", second.ref), f"podman rmi {second.ref}")
    return same, lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    engines = Engines.default()
    if args[:1] in (["podman"], ["buildah"]):  # the engines with this store's flags, by hand
        command = engines.podman if args[0] == "podman" else engines.buildah
        return subprocess.run(command(*args[1:]), check=False).returncode
    parser = argparse.ArgumentParser(prog="python -m vkprovider.devcluster.image")
    sub = parser.add_subparsers(dest="command", required=True)
    build_parser = sub.add_parser("build", help="build the Dockerfile (make image)")
    build_parser.add_argument(
        "--if-possible", action="store_true", help="where containers cannot run here, say why and exit 0"
    )
    build_parser.add_argument(
        "--tag", action="append", default=[], help="another name for the image (a registry's, to push)"
    )
    build_parser.add_argument(
        "--base", help="PYTHON_IMAGE from a registry (pulled if missing) instead of the Debian base"
    )
    sub.add_parser("reproduce", help="build again with --no-cache and compare the layers")
    parsed = parser.parse_args(args)
    try:
        if parsed.command == "reproduce":
            same, lines = reproduce(engines)
            print("\n".join(lines))
            return 0 if same else 1
        built = build(engines, also=tuple(parsed.tag), base=parsed.base)
        print("\n".join(report(engines, built)))
    except Unavailable as exc:
        print(f"image: cannot build here: {exc}", file=sys.stderr)
        return 0 if getattr(parsed, "if_possible", False) else 1
    except StartupError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
