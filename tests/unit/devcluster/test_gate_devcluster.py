"""The descheduler joins the build cache without becoming a control-plane requirement."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

build = importlib.import_module("vkprovider.devcluster.build")


def test_the_descheduler_is_built_but_not_required_to_start_a_cluster(tmp_path: Path) -> None:
    toolchain = build.Toolchain(tmp_path)
    toolchain.bin_dir.mkdir(parents=True)
    for name in build.ALL_BINARIES:
        binary = toolchain.binary(name)
        binary.write_text("#!/bin/sh\n")
        os.chmod(binary, 0o755)
        toolchain.stamp(name).write_text(build._recipe(name))
    assert toolchain.missing() == []
    assert toolchain.missing((*build.ALL_BINARIES, *build.EXTRA_BINARIES)) == [
        "descheduler",
        "kube-proxy",
        "kubelet",
    ]
    # kube-proxy: the control plane's pinned tree and version stamp, not a release of its own
    assert f"gitVersion={build.KUBERNETES_VERSION}" in build._recipe("kube-proxy")
    assert "v0.36.0" in build._recipe("descheduler") and build.STAGING_VERSION in build._recipe("descheduler")
