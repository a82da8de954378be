"""``vkprovider explain`` names the pod, and a plugin whose binary is missing is reported as such
(a one-shot command never waits for a restart, so it must not promise one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vkprovider.cli import main

POD: dict[str, Any] = {
    "kind": "Pod",
    "metadata": {"name": "llm-0", "namespace": "serving"},
    "spec": {"containers": [{"name": "s", "image": "i:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


def test_explain_names_the_pod_and_a_missing_plugin_binary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-plugin"
    config = {"providers": [{"name": "gone", "grpc": {"command": [str(missing)], "call_timeout_seconds": 5}}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(POD))
    code = main(["explain", "-f", str(tmp_path / "pod.yaml"), "--config", str(tmp_path / "config.yaml")])
    out, err = capsys.readouterr()
    assert code == 1, out
    assert out.startswith("decision for pod serving/llm-0:"), out
    assert "dry-run" not in out
    assert (
        f"offers from gone unavailable: Transient: gone: plugin cannot start: cannot run '{missing}'" in out
    )
    assert "restarting in" not in out
    assert "failed to start" not in err  # said once, in the output, not again in the log after it
