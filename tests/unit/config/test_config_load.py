"""Config loading: file + environment merged in one validation pass; start-up checks only when
asked for (``serve``), so ``explain`` and ``plugin serve`` can read a production file anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vkprovider.config import load_settings
from vkprovider.errors import ConfigError
from vkprovider.preflight import StartupChecks, kubeconfig_problem, port_problem, url_problem


def write(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_environment_overrides_one_field_and_keeps_the_files_siblings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, {"node": {"name": "vk-file", "internal_ip": "10.0.0.9"}, "log_level": "debug"})
    monkeypatch.setenv("VKPROVIDER_NODE__NAME", "vk-env")
    monkeypatch.setenv("VKPROVIDER_LOG_JSON", "true")
    settings = load_settings(path)
    assert (settings.node.name, settings.node.internal_ip) == ("vk-env", "10.0.0.9")
    assert settings.log_json and settings.log_level == "DEBUG"


def test_without_startup_checks_the_environment_is_not_inspected(tmp_path: Path) -> None:
    path = write(tmp_path, {"kube": {"kubeconfig": "/nowhere"}, "providers": []})
    assert load_settings(path).kube.kubeconfig == "/nowhere"
    with pytest.raises(ConfigError) as caught:
        load_settings(path, checks=StartupChecks())
    assert "kube.kubeconfig: /nowhere: no such file" in str(caught.value)
    assert "providers: no providers configured" in str(caught.value)


def test_in_cluster_needs_no_kubeconfig(tmp_path: Path) -> None:
    path = write(tmp_path, {"http": {"admin_port": 0}, "providers": [{"name": "a", "adapter": "x"}]})
    settings = load_settings(path, checks=StartupChecks(in_cluster=lambda: True))
    assert settings.kube.kubeconfig is None
    with pytest.raises(ConfigError, match="not running in a cluster"):
        load_settings(path, checks=StartupChecks(in_cluster=lambda: False))


def test_placement_names_are_checked_even_when_a_provider_is_invalid(tmp_path: Path) -> None:
    data = {
        "providers": [
            {"name": "a", "adapter": "x", "settings": {"url": "nope"}},
            {"name": "b", "adapter": "x"},
        ],
        "placement": {"providers": {"a": {}, "c": {}}, "providers_allow": ["b"]},
    }
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, data))
    lines = str(caught.value).splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == [
        "providers.0.settings.url",
        "placement.providers.c",
    ]


def test_duplicate_provider_names_are_named(tmp_path: Path) -> None:
    data = {"providers": [{"name": "a", "adapter": "x"}, {"name": "a", "adapter": "x"}]}
    with pytest.raises(ConfigError, match=r"providers\.1\.name: duplicate provider name 'a'"):
        load_settings(write(tmp_path, data))


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("http://127.0.0.1:8081", True),
        ("https://api.runpod.io", True),
        ("127.0.0.1:8081", False),
        ("http://", False),
        ("ftp://host", False),
        ("http://host:99999", False),
    ],
)
def test_url_problem(value: str, ok: bool) -> None:
    assert (url_problem(value) is None) == ok


def test_port_and_kubeconfig_problems(tmp_path: Path) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert port_problem("127.0.0.1", port) == f"127.0.0.1:{port} is already in use"
    assert port_problem("127.0.0.1", 0) is None
    config = tmp_path / "kc"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c"}}],
                "current-context": "x",
            }
        )
    )
    assert "has no valid server URL" in (kubeconfig_problem(str(config)) or "")


def test_status_before_delete_is_off_by_default_and_a_bad_value_is_named(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, {})).pods.status_before_delete is False
    assert load_settings(write(tmp_path, {"pods": {"status_before_delete": True}})).pods.status_before_delete
    with pytest.raises(ConfigError, match=r"pods\.status_before_delete"):
        load_settings(write(tmp_path, {"pods": {"status_before_delete": "sometimes"}}))


def test_traffic_publishes_endpoints_by_default_and_routable_providers_must_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    providers = [{"name": "cheap", "adapter": "fakecloud", "settings": {"url": "http://127.0.0.1:1"}}]
    settings = load_settings(write(tmp_path, {"providers": providers}))
    assert settings.traffic.publish_endpoints and settings.traffic.routable_pod_ip_providers == []
    monkeypatch.setenv("VKPROVIDER_TRAFFIC__PUBLISH_ENDPOINTS", "false")
    assert load_settings(write(tmp_path, {"providers": providers})).traffic.publish_endpoints is False
    flat = {"providers": providers, "traffic": {"routable_pod_ip_providers": ["cheap"]}}
    assert load_settings(write(tmp_path, flat)).traffic.routable_pod_ip_providers == ["cheap"]
    typo = {"providers": providers, "traffic": {"routable_pod_ip_providers": ["cheep"]}}
    with pytest.raises(ConfigError, match=r"traffic\.routable_pod_ip_providers\.0: no configured provider"):
        load_settings(write(tmp_path, typo))
