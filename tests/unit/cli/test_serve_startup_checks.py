"""``vkprovider serve`` start-up checks, run as an operator would: a real subprocess, a bad
config, and the one message that names the field (exit code 2, never a traceback).

No cluster is needed: every check runs before anything is connected to."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from vkprovider import eventloop
from vkprovider.config import load_settings
from vkprovider.preflight import StartupChecks


def kubeconfig(tmp_path: Path, server: str = "https://127.0.0.1:1") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def good_config(tmp_path: Path) -> dict[str, Any]:
    """A config that passes every check (nothing listens on the URLs: that is fine at start)."""
    return {
        "kube": {"kubeconfig": str(kubeconfig(tmp_path))},
        "http": {"admin_port": 0},
        "providers": [
            {"name": "cheap", "adapter": "fakecloud", "settings": {"url": "http://127.0.0.1:9"}},
            {"name": "premium", "adapter": "fakecloud", "settings": {"url": "http://127.0.0.1:9"}},
        ],
        "placement": {"providers": {"cheap": {"discount": 0.1}, "premium": {"weight": 1.5}}},
    }


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VKPROVIDER_", "KUBERNETES_SERVICE"))}
    env.pop("KUBECONFIG", None)
    return {**env, **extra}


def serve(tmp_path: Path, config: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "vkprovider", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(**env),
    )


def assert_refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    config["kube"]["kubeconfig"] = str(tmp_path / "nope")
    assert_refused(serve(tmp_path, config), "kube.kubeconfig:", "nope: no such file")


def test_a_kubeconfig_that_is_not_one_is_named(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_text("just: [a, list\n")
    config["kube"]["kubeconfig"] = str(garbage)
    assert_refused(serve(tmp_path, config), "kube.kubeconfig:", "not valid YAML")
    garbage.write_text(yaml.safe_dump({"clusters": [], "current-context": "gone"}))
    assert_refused(serve(tmp_path, config), "kube.kubeconfig:", "current-context 'gone'")


def test_no_kubeconfig_outside_a_cluster_is_named(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    del config["kube"]
    result = serve(tmp_path, config, KUBECONFIG="/somewhere/config")
    assert_refused(
        result, "kube.kubeconfig: not set, and not running in a cluster", "VKPROVIDER_KUBE__KUBECONFIG"
    )


def test_unknown_log_level_is_named(tmp_path: Path) -> None:
    config = {**good_config(tmp_path), "log_level": "LOUD"}
    assert_refused(serve(tmp_path, config), "log_level: unknown log level 'LOUD'")


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        yield listener.getsockname()[1]


def test_admin_port_in_use_is_named(tmp_path: Path, busy_port: int) -> None:
    config = good_config(tmp_path)
    config["http"]["admin_port"] = busy_port
    assert_refused(serve(tmp_path, config), f"http.admin_port: 127.0.0.1:{busy_port} is already in use")


def test_kubelet_port_in_use_is_named(tmp_path: Path, busy_port: int) -> None:
    config = {**good_config(tmp_path), "node": {"kubelet_port": busy_port}, "kubelet": {"csr": True}}
    assert_refused(
        serve(tmp_path, config),
        f"node.kubelet_port: 127.0.0.1:{busy_port} is already in use (the kubelet API; host from node.internal_ip)",
    )
    config["kubelet"] = {}  # no kubelet API configured: the port is not needed, nor checked
    path = tmp_path / "no-kubelet.yaml"
    path.write_text(yaml.safe_dump(config))
    assert load_settings(str(path), checks=StartupChecks()).node.kubelet_port == busy_port


def test_lease_renewal_not_shorter_than_the_lease_is_named(tmp_path: Path) -> None:
    config = {**good_config(tmp_path), "node": {"lease_duration_seconds": 10, "lease_renew_seconds": 10}}
    assert_refused(serve(tmp_path, config), "node.lease_renew_seconds: 10 must be less than")


def test_no_providers_is_refused(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    config["providers"], config["placement"] = [], {}
    assert_refused(serve(tmp_path, config), "providers: no providers configured")


def test_provider_url_that_is_not_a_url_is_named(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    config["providers"][1]["settings"]["url"] = "127.0.0.1:8081"
    assert_refused(serve(tmp_path, config), "providers.1.settings.url: provider 'premium'", "is not a URL")


def test_adapter_settings_are_validated_by_the_adapter(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    config["providers"][0]["settings"] = {"url": "http://127.0.0.1:9", "timeout_secs": 3}
    assert_refused(serve(tmp_path, config), "providers.0.settings.timeout_secs: provider 'cheap'")


def test_placement_names_must_match_configured_providers(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    config["placement"] = {"providers": {"cheep": {"discount": 0.2}}, "providers_deny": ["primium"]}
    assert_refused(
        serve(tmp_path, config),
        "placement.providers.cheep: no configured provider is named 'cheep' (configured: cheap, premium)",
        "placement.providers_deny.0: no configured provider is named 'primium'",
    )


def test_a_bad_environment_override_names_the_variable_not_the_file(tmp_path: Path) -> None:
    result = serve(tmp_path, good_config(tmp_path), VKPROVIDER_NODE__LEASE_RENEW_SECONDS="soon")
    assert_refused(result, "VKPROVIDER_NODE__LEASE_RENEW_SECONDS (node.lease_renew_seconds): Input should be")
    assert "bad.yaml" not in result.stderr.split("\n", 1)[1]


def test_every_bad_field_is_reported_in_one_message(tmp_path: Path, busy_port: int) -> None:
    config = good_config(tmp_path)
    config["log_level"] = "chatty"
    config["http"]["admin_port"] = busy_port
    config["node"] = {"lease_duration_seconds": 5, "lease_renew_seconds": 6}
    config["providers"][0]["settings"]["url"] = "ftp//x"
    config["placement"]["providers"]["nobody"] = {"weight": 2}
    result = serve(tmp_path, config, VKPROVIDER_PODS__WORKERS="many")
    assert_refused(
        result,
        "log_level:",
        "http.admin_port:",
        "node.lease_renew_seconds:",
        "providers.0.settings.url:",
        "placement.providers.nobody:",
        "VKPROVIDER_PODS__WORKERS (pods.workers):",
    )
    assert result.stderr.count("error:") == 1  # one message, one line per field


def run_until(tmp_path: Path, config: dict[str, Any], needle: str, count: int, **env: str) -> str:
    """Start ``serve``, wait until ``needle`` was logged ``count`` times, SIGTERM it (exit 0)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vkprovider", "serve", "--config", str(path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(**env),
        )
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count(needle) < count:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log.read_text()


def closed_port() -> int:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_apiserver_at_start_is_retried_with_one_line_per_attempt(tmp_path: Path) -> None:
    """Nothing listens at the kubeconfig's server: the service waits and says so, no traceback;
    SIGTERM still stops it cleanly."""
    config = good_config(tmp_path)
    config["kube"]["kubeconfig"] = str(kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}"))
    text = run_until(tmp_path, config, "reaching the API server", 2)
    assert "Traceback" not in text and "ExceptionGroup" not in text, text
    attempts = [line for line in text.splitlines() if "reaching the API server" in line]
    assert "(attempt 1)" in attempts[0] and "retrying in" in attempts[0]
    assert "stopped before start-up finished" in text


def test_json_logs_are_one_object_per_line(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    config["kube"]["kubeconfig"] = str(kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}"))
    text = run_until(tmp_path, config, "reaching the API server", 1, VKPROVIDER_LOG_JSON="true")
    entries = [json.loads(line) for line in text.splitlines()]
    loop = "uvloop" if eventloop.uvloop_available() else "asyncio"  # event_loop: auto
    assert (entries[0]["level"], entries[0]["msg"]) == ("info", f"event loop: {loop}")
    first = next(entry for entry in entries if entry["logger"] == "vkprovider.service")
    assert first["level"] == "warning"
    assert "reaching the API server" in first["msg"] and first["ts"].endswith("Z")
