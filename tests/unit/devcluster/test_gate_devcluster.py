"""The descheduler joins the build cache without becoming a control-plane requirement; kwok's
delay stages are valid YAML Stage documents."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import yaml

from vkprovider.devcluster import kwok

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
    assert toolchain.missing((*build.ALL_BINARIES, *build.EXTRA_BINARIES)) == ["descheduler"]
    assert "v0.36.0" in build._recipe("descheduler") and build.STAGING_VERSION in build._recipe("descheduler")


def test_kwok_stages_delay_by_annotation() -> None:
    stages = {d["metadata"]["name"]: d for d in yaml.safe_load_all(kwok.POD_STAGES)}
    assert set(stages) == {"pod-ready", "pod-complete", "pod-delete"}
    assert (
        kwok.READY_DELAY_ANNOTATION in stages["pod-ready"]["spec"]["delay"]["durationFrom"]["expressionFrom"]
    )
    assert (
        kwok.COMPLETE_DELAY_ANNOTATION
        in stages["pod-complete"]["spec"]["delay"]["durationFrom"]["expressionFrom"]
    )
    assert stages["pod-delete"]["spec"]["next"]["delete"] is True
