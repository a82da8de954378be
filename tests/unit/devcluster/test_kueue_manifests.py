"""Kueue's upstream manifests, read from the Go module cache, rewritten for 127.0.0.1."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from vkprovider.devcluster.kueue import (
    crds,
    manager_config,
    webhook_configurations,
)
from vkprovider.devcluster.kueue_build import KUEUE_MODULE, KUEUE_VERSION, go_module_dir

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (module cache)")


@pytest.fixture(scope="module")
def kueue_dir() -> Path:
    return go_module_dir(KUEUE_MODULE, KUEUE_VERSION)


def test_webhooks_become_urls_on_loopback_for_kueue_kinds_and_jobs_only(kueue_dir: Path) -> None:
    configs = webhook_configurations(kueue_dir, 9443, b"PEM")
    assert {c["kind"] for c in configs} == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    hooks = [hook for c in configs for hook in c["webhooks"]]
    paths = {hook["clientConfig"]["url"] for hook in hooks}
    assert "https://127.0.0.1:9443/mutate-batch-v1-job" in paths
    assert "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-clusterqueue" in paths
    assert not any("pod" in p.rsplit("/", 1)[1].split("-") for p in paths), (
        "no pod webhook: pods never wait on Kueue"
    )
    assert all(hook["clientConfig"]["caBundle"] == base64.b64encode(b"PEM").decode() for hook in hooks)
    assert all("service" not in hook["clientConfig"] for hook in hooks)


def test_crds_include_the_queue_kinds(kueue_dir: Path) -> None:
    names = {crd["metadata"]["name"] for crd in crds(kueue_dir)}
    assert {
        "clusterqueues.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
    } <= names


def test_manager_config_disables_what_cannot_run_on_loopback(tmp_path: Path) -> None:
    config = manager_config(1, 2, 3, tmp_path)
    assert config["internalCertManagement"] == {"enable": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}
    assert config["webhook"]["host"] == "127.0.0.1"
    assert config["integrations"]["frameworks"] == ["batch/job"]
