"""A missing provider key names the Kubernetes Secret it should come from (the deployment's
``envFrom`` Secret is optional, so the pod starts and the node says what to create)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkprovider.errors import QuotaOrBilling
from vkprovider.plugins.api import ApiKeySource

SECRET = "vkprovider-system/vkprovider-provider-keys (key RUNPOD_API_KEY)"


def test_an_unset_variable_names_the_secret_and_the_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEPLOY_TEST_KEY", raising=False)
    source = ApiKeySource(
        "rp", api_key=None, api_key_env="DEPLOY_TEST_KEY", api_key_file=None, api_key_secret=SECRET
    )
    with pytest.raises(QuotaOrBilling) as raised:
        source.get()
    message = str(raised.value)
    assert "DEPLOY_TEST_KEY is unset" in message
    assert f"Secret {SECRET}: create it, then restart vkprovider" in message


def test_a_missing_file_names_the_secret_and_is_read_again_later(tmp_path: Path) -> None:
    key = tmp_path / "api-key"
    source = ApiKeySource("rp", api_key=None, api_key_env=None, api_key_file=key, api_key_secret=SECRET)
    with pytest.raises(QuotaOrBilling, match="it comes from Secret vkprovider-system/"):
        source.get()
    key.write_text("rpa_123\n")  # the kubelet projects the Secret once it exists: no restart
    assert source.get() == "rpa_123"


def test_without_a_secret_the_message_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEPLOY_TEST_KEY", raising=False)
    source = ApiKeySource("rp", api_key=None, api_key_env="DEPLOY_TEST_KEY", api_key_file=None)
    with pytest.raises(QuotaOrBilling) as raised:
        source.get()
    assert "Secret" not in str(raised.value)
