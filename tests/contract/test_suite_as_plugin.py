"""The contract suite as an author runs it: ``pytest --vkprovider-harness=...`` in a project of
its own (no conftest, no pytest settings, pytest-asyncio's strict default), in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def run_suite(project: Path, spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", f"--vkprovider-harness={spec}"]
    return subprocess.run(
        [*command, *args], cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def counts(output: str) -> dict[str, int]:
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", output)}


def test_the_plugin_runs_the_suite_from_another_project(tmp_path: Path) -> None:
    result = run_suite(tmp_path, "harness_memory:harness", "-k", "concurrent_first or same_uid or racing")
    found = counts(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert found.get("passed", 0) >= 9 and "failed" not in found, result.stdout  # 3 tests x 3 variants


def test_an_adapter_without_a_per_uid_lock_fails_concurrent_first_deploys(tmp_path: Path) -> None:
    result = run_suite(tmp_path, "broken_adapter:harness", "-k", "concurrent_first or same_uid_deployed")
    found = counts(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"FAILED .*test_concurrent_first_deploys_make_one_deployment", result.stdout)
    assert found.get("failed", 0) >= 1 and "concurrent first deploys of one UID made" in result.stdout


def test_a_missing_harness_is_a_usage_error(tmp_path: Path) -> None:
    result = run_suite(tmp_path, "no_such_module:harness")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "no_such_module" in result.stderr


def test_a_plugin_command_without_a_python_adapter_runs_through_the_supervisor(tmp_path: Path) -> None:
    result = run_suite(
        tmp_path, "external_harness:harness", "-k", "concurrent_first or killed or every_operation", "-rs"
    )
    found = counts(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"test_concurrent_first_deploys_make_one_deployment\[subprocess\] PASSED", result.stdout)
    assert "only the plugin subprocess variant applies" in result.stdout
    assert found.get("passed", 0) >= 3 and "failed" not in found, result.stdout
