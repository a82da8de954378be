"""``make image``'s command lines, without building: what buildah and mmdebstrap are told."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from vkprovider.devcluster import apt, containers, image, image_base
from vkprovider.devcluster.process import StartupError

ROOT = Path(__file__).resolve().parents[3]


def test_the_engines_run_with_runc_cgroupfs_and_the_store_under_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VKPROVIDER_CACHE", str(tmp_path))
    engines = containers.Engines.default()
    podman = engines.podman("ps")
    assert podman[0] == "podman" and podman[-1] == "ps"
    for flag, value in (("--runtime", "runc"), ("--cgroup-manager", "cgroupfs"), ("--root", str(tmp_path))):
        assert value in podman[podman.index(flag) + 1], (flag, podman)
    buildah = engines.buildah("images")
    assert buildah[buildah.index("--root") + 1] == podman[podman.index("--root") + 1]  # one store
    assert not str(engines.root).startswith(str(ROOT))


def test_the_tools_need_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(containers.os, "geteuid", lambda: 1000)
    with pytest.raises(containers.Unavailable, match="needs root"):
        containers.ensure_tools()


def test_apt_installs_nothing_when_the_binaries_are_there(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("apt-get ran")

    monkeypatch.setattr(apt.subprocess, "run", refuse)
    apt.install({"sh": "dash"})
    assert apt.missing({"sh": "dash", "no-such-binary-here": "nothing"}) == ["nothing"]


def test_apt_names_the_packages_when_apt_get_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apt.shutil, "which", lambda name: None)
    with pytest.raises(StartupError, match="buildah, podman not installed and apt-get is not available"):
        apt.install({"podman": "podman", "buildah": "buildah"})


def test_the_base_is_tagged_by_the_digest_of_its_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    tag = image_base.tag()
    assert re.fullmatch(r"localhost/vkprovider-python:3\.11-bookworm-[0-9a-f]{16}", tag)
    args = image_base.mmdebstrap_args()
    assert f"--include={','.join(image_base.PACKAGES)}" in args and args[-1] == "bookworm"
    monkeypatch.setattr(image_base, "PACKAGES", (*image_base.PACKAGES, "curl"))
    assert image_base.tag() != tag  # another package list: another base
    monkeypatch.undo()
    monkeypatch.setattr(image_base, "MIRRORS", image_base.MIRRORS[:1])
    assert image_base.tag() != tag


def test_buildah_builds_the_shipped_dockerfile_reproducibly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in image.CA_BUNDLE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(image, "HOST_CA_BUNDLE", tmp_path / "none.crt")
    args = image.bud_args("localhost/base:1", "localhost/vkprovider:0.1.0")
    assert args[0] == "bud" and args[-1] == str(ROOT)
    assert args[args.index("--file") + 1] == str(ROOT / "Dockerfile")  # the one file there is
    assert args[args.index("--timestamp") + 1] == str(image_base.SOURCE_DATE_EPOCH)
    build_args = [args[i + 1] for i, arg in enumerate(args) if arg == "--build-arg"]
    assert build_args == [
        f"SOURCE_DATE_EPOCH={image_base.SOURCE_DATE_EPOCH}",
        "PYTHON_IMAGE=localhost/base:1",
    ]
    assert "--layers" in args and "--pull=never" in args and "--no-cache" not in args
    assert "--volume" not in args
    assert "--no-cache" in image.bud_args("b", "t", no_cache=True)
    assert "--pull=missing" in image.bud_args("python:3.11-slim-bookworm", "t", pull=True)  # a registry base


def test_the_hosts_ca_bundle_is_mounted_for_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in image.CA_BUNDLE_ENV:
        monkeypatch.delenv(name, raising=False)
    system = tmp_path / "system.crt"
    monkeypatch.setattr(image, "HOST_CA_BUNDLE", system)
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "absent.crt"))
    assert image.ca_bundle() is None
    system.write_text("-----BEGIN CERTIFICATE-----\n")
    assert image.ca_bundle() == system
    bundle = tmp_path / "egress.crt"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    args = image.bud_args("b", "t")
    assert args[args.index("--volume") + 1] == f"{bundle}:/etc/ssl/certs/ca-certificates.crt:ro"


def test_the_image_has_the_name_and_tag_the_base_deploys() -> None:
    kustomization = yaml.safe_load((ROOT / "deploy" / "base" / "kustomization.yaml").read_text())
    (pinned,) = kustomization["images"]
    assert f"localhost/{pinned['newName']}:{pinned['newTag']}" == image.IMAGE
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == image.VERSION


def test_the_dockerfile_takes_the_base_and_the_epoch_as_build_args() -> None:
    text = (ROOT / "Dockerfile").read_text()
    declared = re.findall(r"^ARG (\w+)", text, re.M)
    assert declared.count("PYTHON_IMAGE") == 1 and declared.count("SOURCE_DATE_EPOCH") == 2
