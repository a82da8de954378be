"""A ConfigMap with a bad field: `vkprovider serve` (the container's command) exits with code 2
and the one-line error naming the field, on stderr (what `kubectl logs` shows), before it
connects to anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.unit.deploy import rendering

pytestmark = pytest.mark.skipif(rendering.kubectl() is None, reason="no kubectl: run `make cluster-build`")


def serve(config: dict[str, object], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    kubeconfig = tmp_path / "kubeconfig"  # stands in for the in-cluster credentials
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VKPROVIDER_")}
    env.update(VKPROVIDER_KUBE__KUBECONFIG=str(kubeconfig), VKPROVIDER_HTTP__ADMIN_PORT="0")
    return subprocess.run(
        [sys.executable, "-m", "vkprovider", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("section", "field", "value", "named"),
    [
        ("pods", "wokers", 16, "pods.wokers"),
        ("pods", "workers", "many", "pods.workers"),
        ("leader_election", "enabled", "sometimes", "leader_election.enabled"),
    ],
)
def test_a_bad_field_in_the_rendered_config_map_exits_naming_it(
    section: str, field: str, value: object, named: str, tmp_path: Path
) -> None:
    config = rendering.service_config(rendering.objects(rendering.render("demo")))
    config[section][field] = value
    done = serve(config, tmp_path)
    assert done.returncode == 2, done.stderr
    problems = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert len(problems) == 1 and problems[0].startswith(f"{named}:"), done.stderr
    assert "Traceback" not in done.stderr
